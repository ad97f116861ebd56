// Fuzzes the grammar compilers with hostile text: the input is a GBNF grammar or a JSON
// Schema (its first byte picks which; the rest up to a NUL is the text, what follows is
// output to match). A refusal must be InvalidArgument with the compiler's prefix; a
// compiled grammar drives a matcher over the trailing bytes, whose refusals must leave its
// state as it was (Advance refuses without moving).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_data.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using pagoda::fuzz::Check;
  if (size == 0) return 0;
  const bool gbnf = (data[0] & 1) == 0;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = rest.find('\0');
  const std::string_view text = rest.substr(0, nul);
  const std::string_view output =
      nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  const absl::string_view source(text.data(), text.size());
  auto grammar =
      gbnf ? pagoda::grammar::CompileGbnf(source) : pagoda::grammar::CompileJsonSchema(source);
  if (!grammar.ok()) {
    Check(grammar.status().code() == absl::StatusCode::kInvalidArgument, "refusal code");
    const absl::string_view prefix = gbnf ? "gbnf: " : "json schema: ";
    Check(grammar.status().message().substr(0, prefix.size()) == prefix, "refusal prefix");
    return 0;
  }
  pagoda::grammar::Matcher matcher(*grammar);
  for (size_t i = 0; i < output.size(); ++i) {
    const size_t heads = matcher.num_heads();
    const bool can_end = matcher.CanEnd();
    if (!matcher.Advance(output.substr(i, 1))) {
      Check(matcher.num_heads() == heads && matcher.CanEnd() == can_end, "refusal moved state");
      continue;
    }
    matcher.Compact();
  }
  return 0;
}
