// Fuzzes the grammar stack with the shapes that once froze or crashed the daemon (issue 44).
// The input drives a generator, not a parser: its bytes pick a shape and its sizes, and what
// is left is output to match. Shapes: alternation chains (identical alternatives, or ones
// whose stacks differ), nullable products, nested quantifiers (GBNF and patterns), many
// alternatives, long type lists, chains of identical $refs, large enums and lists of tools.
// Each is compiled, started, masked over a small vocabulary and advanced byte by byte.
// Invariants, through the counters the limits are kept by (never the clock):
//  - a refusal is InvalidArgument, with its compiler's prefix;
//  - a grammar is within its compiler's size budget;
//  - a matcher's start and each byte cost at most its per-byte step limit (plus one rule's
//    alternatives, the granularity the budget is charged in), a mask at most its per-mask
//    limit (plus one byte's); it holds at most max_heads heads;
//  - a matcher over a limit says so (ResourceExhausted, "grammar: ...") and stays failed.
// run_fuzzers.sh runs it with a per-input CPU-time and memory cap (-timeout, -rss_limit_mb).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "chat/tool_call_grammar.h"
#include "chat/tool_definitions.h"
#include "fuzz/fuzz_data.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "nlohmann/json.hpp"

namespace {

using pagoda::fuzz::Check;
namespace grammar = pagoda::grammar;

// Small limits, so that every shape reaches them at a fuzzer's pace (thousands of inputs a
// second would be ideal; each input's cost is bounded by these).
constexpr size_t kMaxElements = size_t{1} << 14;
constexpr grammar::MatcherLimits kLimits{
    .max_heads = 256, .max_steps_per_byte = int64_t{1} << 12, .max_steps_per_mask = 1 << 14};
// Output bytes matched (each with a mask before it).
constexpr size_t kMaxOutput = 8;

// Draws from the input's front; zeros once it is used up.
class Gen {
 public:
  Gen(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // In [lo, hi].
  int Range(int lo, int hi) {
    const int span = hi - lo + 1;
    const int v = (Byte() << 8) | Byte();
    return lo + v % span;
  }
  bool Coin() { return (Byte() & 1) != 0; }
  std::string_view Rest() const {
    return std::string_view(reinterpret_cast<const char*>(data_) + pos_, size_ - pos_);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

std::string Quantifier(Gen& g) {
  switch (g.Range(0, 4)) {
    case 0:
      return "?";
    case 1:
      return "*";
    case 2:
      return "+";
    case 3:
      return absl::StrCat("{0,", g.Range(0, 9), "}");
    default:
      return absl::StrCat("{", g.Range(0, 3), ",", g.Range(3, 12), "}");
  }
}

std::string GbnfShape(Gen& g, int kind) {
  std::string t;
  switch (kind) {
    case 0: {  // a_i ::= a_{i+1} | a_{i+1}; or stacks that differ per alternative
      const int depth = g.Range(1, 48);
      const bool distinct = g.Coin();
      t = "root ::= \"s\" a0\n";
      for (int i = 0; i < depth; ++i) {
        if (distinct) {
          absl::StrAppend(&t, "a", i, " ::= a", i + 1, " \"1\" | a", i + 1, " \"2\"\n");
        } else {
          absl::StrAppend(&t, "a", i, " ::= a", i + 1, " | a", i + 1, "\n");
        }
      }
      absl::StrAppend(&t, "a", depth, " ::= \"x\" | \"\"\n");
      return t;
    }
    case 1: {  // root ::= e e ... e "x", e ::= "" | ""
      const int k = g.Range(1, 64);
      t = "root ::=";
      for (int i = 0; i < k; ++i) t += " e";
      return t + " \"x\"\ne ::= \"\" | \"\" | \"e\"?\n";
    }
    case 2: {  // nested quantifiers over a nullable core
      const int nesting = g.Range(1, 6);
      std::string core = "\"a\"" + Quantifier(g);
      for (int i = 0; i < nesting; ++i) core = "(" + core + ")" + Quantifier(g);
      return "root ::= " + core + " \"b\"?\n";
    }
    default: {  // many alternatives sharing a prefix
      const int count = g.Range(1, 600);
      t = "root ::= ";
      for (int i = 0; i < count; ++i) absl::StrAppend(&t, i ? " | " : "", "\"k", i, "\" [a-z]?");
      return t + "\n";
    }
  }
}

// `scale` divides the sizes (a tool list holds several).
nlohmann::json SchemaShape(Gen& g, int kind, int scale = 1) {
  using nlohmann::json;
  switch (kind) {
    case 0: {  // a long type list, repeats included, with large counts
      static const char* kTypes[] = {"string", "number", "integer", "boolean",
                                     "null",   "array",  "object"};
      json types = json::array();
      const int n = g.Range(1, 40);
      for (int i = 0; i < n; ++i) types.push_back(kTypes[g.Range(0, 6)]);
      return {{"type", types},
              {"maxLength", g.Range(0, 600 / scale)},
              {"maxItems", g.Range(0, 600 / scale)}};
    }
    case 1: {  // $defs chain of anyOf's of identical $refs
      const int depth = g.Range(1, 48 / scale);
      const int width = g.Range(1, 4);
      json defs = json::object();
      for (int i = 0; i < depth; ++i) {
        json any = json::array();
        for (int w = 0; w < width; ++w) {
          any.push_back(g.Coin() ? json{{"$ref", absl::StrCat("#/$defs/d", i + 1)}}
                                 : json{{"type", "array"},
                                        {"items", {{"$ref", absl::StrCat("#/$defs/d", i + 1)}}}});
        }
        defs[absl::StrCat("d", i)] = {{"anyOf", any}};
      }
      defs[absl::StrCat("d", depth)] = {{"type", "boolean"}};
      return {{"$defs", defs}, {"$ref", "#/$defs/d0"}};
    }
    case 2: {  // nested quantifiers and groups in a pattern
      const int nesting = g.Range(1, 80);
      std::string p = "a";
      for (int i = 0; i < nesting; ++i) {
        p = "(" + p + (g.Coin() ? "?" : "") + ")" +
            (g.Coin() ? absl::StrCat("{0,", g.Range(0, 9), "}") : "");
      }
      return {{"type", "string"}, {"pattern", absl::StrCat(g.Coin() ? "^" : "", p, "$")}};
    }
    default: {  // a large enum of values sharing prefixes, repeats included
      json values = json::array();
      const int n = g.Range(1, 800 / scale);
      const int modulo = g.Range(1, 800 / scale);
      for (int i = 0; i < n; ++i) values.push_back(absl::StrCat("v-", i % modulo));
      if (g.Coin()) return {{"type", "object"}, {"properties", {{"c", {{"enum", values}}}}}};
      return {{"enum", values}};
    }
  }
}

const grammar::TokenMasker& Masker() {
  static const grammar::TokenMasker* masker = [] {
    std::vector<std::string> vocab;
    for (char c = ' '; c < 127; ++c) vocab.emplace_back(1, c);
    for (const char* piece : {"k1", "v-", "\":", "{\"", "\"}", "true", "false", "aa", "12", "[[",
                              "]]", "\n", "x\"", "ab"}) {
      vocab.emplace_back(piece);
    }
    vocab.emplace_back("");  // end of generation
    const int32_t eos = static_cast<int32_t>(vocab.size()) - 1;
    return new grammar::TokenMasker(vocab, {eos});
  }();
  return *masker;
}

void CheckFailed(const grammar::Matcher& m) {
  Check(m.status().code() == absl::StatusCode::kResourceExhausted, "limit status code");
  Check(m.status().message().substr(0, 9) == "grammar: ", "limit message prefix");
}

void Drive(const std::shared_ptr<const grammar::Grammar>& g, std::string_view output) {
  Check(g->num_elements() + static_cast<size_t>(g->num_rules()) <= kMaxElements,
        "grammar within its size budget");
  const int64_t slack = static_cast<int64_t>(g->num_elements());
  grammar::Matcher m(g, kLimits);
  Check(m.steps() <= kLimits.max_steps_per_byte + slack, "start within the per-byte limit");
  if (!m.ok()) {
    CheckFailed(m);
    Check(m.IsDone(), "a failed start holds no head");
    return;
  }
  grammar::MaskCache cache;
  grammar::TokenBitmask mask;
  for (size_t i = 0; i <= output.size(); ++i) {
    Check(m.num_heads() <= kLimits.max_heads, "heads within max_heads");
    const int64_t before = cache.steps();
    const absl::Status masked = Masker().FillMask(m, &mask, &cache);
    Check(cache.steps() - before <= kLimits.max_steps_per_mask + kLimits.max_steps_per_byte + slack,
          "mask within the per-mask limit");
    if (!masked.ok()) {
      Check(masked.code() == absl::StatusCode::kResourceExhausted, "mask limit status code");
      return;
    }
    if (i == output.size()) break;
    const int64_t steps = m.steps();
    const size_t heads = m.num_heads();
    const bool accepted = m.Advance(output.substr(i, 1));
    Check(m.steps() - steps <= kLimits.max_steps_per_byte + slack, "byte within its limit");
    if (!m.ok()) {
      Check(!accepted, "a byte over the limits is refused");
      CheckFailed(m);
      Check(!m.Advance(output.substr(i, 1)), "a failed matcher stays failed");
      return;
    }
    if (!accepted) {
      Check(m.num_heads() == heads, "a refusal keeps the state");
      continue;
    }
    m.Compact();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Gen g(data, size);
  const int shape = g.Range(0, 8);
  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> compiled;
  absl::string_view prefix;
  grammar::SchemaLimits schema_limits;
  schema_limits.max_elements = kMaxElements;
  if (shape < 4) {
    grammar::GbnfLimits limits;
    limits.max_elements = kMaxElements;
    compiled = grammar::CompileGbnf(GbnfShape(g, shape), limits);
    prefix = "gbnf: ";
  } else if (shape < 8) {
    compiled = grammar::CompileJsonSchema(SchemaShape(g, shape - 4).dump(), schema_limits);
    prefix = "json schema: ";
  } else {  // several tools, each one of the schema shapes, joined under one budget
    nlohmann::json tools = nlohmann::json::array();
    const int n = g.Range(1, 6);
    for (int i = 0; i < n; ++i) {
      nlohmann::json parameters = {{"type", "object"},
                                   {"properties", {{"p", SchemaShape(g, g.Range(0, 3), 8)}}}};
      tools.push_back({{"type", "function"},
                       {"function", {{"name", absl::StrCat("f", i)}, {"parameters", parameters}}}});
    }
    auto defs = pagoda::chat::ParseToolDefinitions(tools);
    Check(defs.ok(), "generated tools parse");
    pagoda::chat::ToolGrammarOptions options;
    options.limits = schema_limits;
    compiled =
        pagoda::chat::BuildToolCallGrammar(pagoda::chat::ToolCallFormat::kHermes, *defs, options);
    prefix = "tool";
  }
  if (!compiled.ok()) {
    Check(compiled.status().code() == absl::StatusCode::kInvalidArgument, "refusal code");
    Check(compiled.status().message().substr(0, prefix.size()) == prefix, "refusal prefix");
    return 0;
  }
  Drive(*compiled, g.Rest().substr(0, kMaxOutput));
  return 0;
}
