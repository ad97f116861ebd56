// The checks every tokenizer fuzz target makes on one input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_data.h"
#include "model/tokenizer.h"
#include "model/utf8.h"

namespace pagoda::fuzz {

// Encodes `text` with and without special-token parsing, checks every id is in the
// vocabulary, decodes the ids (valid UTF-8), and checks the incremental detokenizer's
// deltas concatenate to Decode(ids, false). Returns the ids of the plain encoding.
inline std::vector<int32_t> CheckTokenizer(const model::Tokenizer& tokenizer, std::string_view text,
                                           bool add_bos) {
  std::vector<int32_t> plain;
  for (bool parse_special : {false, true}) {
    std::vector<int32_t> ids = tokenizer.Encode(text, add_bos, parse_special);
    for (int32_t id : ids) Check(id >= 0 && id < tokenizer.vocab_size(), "id out of range");
    const std::string decoded = tokenizer.Decode(ids);
    Check(model::IsValidUtf8(decoded), "Decode gave invalid UTF-8");
    model::IncrementalDetokenizer detok(&tokenizer);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string delta = detok.Append(id);
      Check(model::IsValidUtf8(delta), "a detokenizer delta is invalid UTF-8");
      streamed += delta;
    }
    streamed += detok.Flush();
    Check(streamed == tokenizer.Decode(ids, /*strip_leading_space=*/false),
          "streamed text differs from Decode(ids, false)");
    if (!parse_special) plain = std::move(ids);
  }
  return plain;
}

}  // namespace pagoda::fuzz
