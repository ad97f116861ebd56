// Special tokens as llama.cpp finds and parses them (internal to the tokenizers): token
// types fixed up by text, the end-of-generation set, and the split of text at special-token
// text.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "model/tokenizer.h"

namespace pagoda::model {

// Fills the special ids the spec leaves at -1 (eot, eom, fim_*) from token text as llama.cpp
// does, makes tokens with end-marker text control tokens (and a few others user-defined), and
// returns the end-of-generation ids, ascending. `spec` must be validated with token types.
std::vector<int32_t> ResolveSpecialTokens(TokenizerSpec* spec);

// A piece of text to encode (id -1: text[begin, begin + len)) or a special token.
struct Fragment {
  int32_t id;
  size_t begin;
  size_t len;
};

// Finds special-token text in prompts: control, user-defined and unknown tokens, longest
// text first.
class SpecialTokenSplitter {
 public:
  // `spec` must be resolved (ResolveSpecialTokens) and outlive the splitter.
  explicit SpecialTokenSplitter(const TokenizerSpec& spec);
  // Splits `text` at each occurrence of a special token's text. Without `parse_special` only
  // user-defined tokens are split out (as llama.cpp does). Phi-3's special tokens (by
  // general.name, as llama.cpp decides) drop the ASCII whitespace after them. A control or
  // unknown token whose occurrence overlaps a range of `plain` (sorted, disjoint) is not
  // split out there: that text stays text, as without parse_special.
  std::vector<Fragment> Split(std::string_view text, bool parse_special,
                              absl::Span<const TextRange> plain = {}) const;

 private:
  struct Special {
    int32_t id;
    std::string_view text;
    bool user_defined;
    bool rstrip;
  };
  // Splits the text fragments of `*fragments` at occurrences of `s`.
  void SplitAt(std::string_view text, const Special& s, absl::Span<const TextRange> plain,
               std::vector<Fragment>* fragments) const;

  std::vector<Special> specials_;
};

}  // namespace pagoda::model
