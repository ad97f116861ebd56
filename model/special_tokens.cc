#include "model/special_tokens.h"

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "model/bpe.h"

namespace pagoda::model {
namespace {

using TextIndex = absl::flat_hash_map<absl::string_view, int32_t>;

// Texts that make a token an end marker of each kind when the GGUF names none (llama.cpp).
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // <｜end▁of▁sentence｜>
    "<end_of_utterance>",
};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreTexts[] = {"<|fim_prefix|>",
                                             "<fim-prefix>",
                                             "<fim_prefix>",
                                             "<\xEF\xBD\x9C"
                                             "fim\xE2\x96\x81"
                                             "begin\xEF\xBD\x9C>",
                                             "<PRE>",
                                             "\xE2\x96\x81<PRE>",
                                             "<|code_prefix|>",
                                             "<|prefix|>"};
constexpr std::string_view kFimSufTexts[] = {"<|fim_suffix|>",
                                             "<fim-suffix>",
                                             "<fim_suffix>",
                                             "<\xEF\xBD\x9C"
                                             "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                                             "<SUF>",
                                             "\xE2\x96\x81<SUF>",
                                             "<|code_suffix|>",
                                             "<|suffix|>"};
constexpr std::string_view kFimMidTexts[] = {"<|fim_middle|>",
                                             "<fim-middle>",
                                             "<fim_middle>",
                                             "<\xEF\xBD\x9C"
                                             "fim\xE2\x96\x81"
                                             "end\xEF\xBD\x9C>",
                                             "<MID>",
                                             "\xE2\x96\x81<MID>",
                                             "<|code_middle|>",
                                             "<|middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                             "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                             "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};

// Every token with one of these texts ends generation.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "[e~[",
};

// Tokens llama.cpp always renders as text (gpt-oss).
constexpr std::string_view kRenderedTexts[] = {"<|channel|>", "<|message|>", "<|start|>",
                                               "<|constrain|>"};

int32_t Find(const TextIndex& index, std::string_view text) {
  const auto it = index.find(bpe::Key(text));
  return it == index.end() ? -1 : it->second;
}

void SetType(TokenizerSpec* spec, int32_t id, TokenType type) {
  spec->token_types[id] = static_cast<int32_t>(type);
}

// When `*id` is unset: the lowest id among tokens with one of `texts`, made a control token.
template <size_t N>
void Detect(const TextIndex& index, const std::string_view (&texts)[N], TokenizerSpec* spec,
            int32_t* id) {
  if (*id >= 0) return;
  for (std::string_view text : texts) {
    const int32_t found = Find(index, text);
    if (found >= 0 && (*id < 0 || found < *id)) *id = found;
  }
  if (*id >= 0) SetType(spec, *id, TokenType::kControl);
}

// llama.cpp's exceptions: with <|return|> and <|call|> (gpt-oss), or <|calls|> and <|flush|>
// (solar-open), <|end|> is no end marker; with <|tool_response> (gemma4), </s> is none.
void ApplyEogExceptions(TokenizerSpec* spec, std::set<int32_t>* eog) {
  auto in_eog = [&](std::string_view text) -> int32_t {
    for (int32_t id : *eog) {
      if (spec->tokens[id] == text) return id;
    }
    return -1;
  };
  const bool has_call = in_eog("<|call|>") >= 0 || in_eog("<|calls|>") >= 0;
  const int32_t end = in_eog("<|end|>");
  if (end >= 0 && has_call && (in_eog("<|return|>") >= 0 || in_eog("<|flush|>") >= 0)) {
    eog->erase(end);
    SetType(spec, end, TokenType::kUserDefined);
  }
  const int32_t eos_text = in_eog("</s>");
  if (eos_text >= 0 && in_eog("<|tool_response>") >= 0) {
    eog->erase(eos_text);
    SetType(spec, eos_text, TokenType::kNormal);
  }
}

}  // namespace

std::vector<int32_t> ResolveSpecialTokens(TokenizerSpec* spec) {
  TextIndex index;
  index.reserve(spec->tokens.size());
  for (int32_t id = 0; id < static_cast<int32_t>(spec->tokens.size()); ++id) {
    index[bpe::Key(spec->tokens[id])] = id;  // the last of equal texts wins, as in llama.cpp
  }
  Detect(index, kEotTexts, spec, &spec->eot_id);
  Detect(index, kEomTexts, spec, &spec->eom_id);
  Detect(index, kFimPreTexts, spec, &spec->fim_pre_id);
  Detect(index, kFimSufTexts, spec, &spec->fim_suf_id);
  Detect(index, kFimMidTexts, spec, &spec->fim_mid_id);
  Detect(index, kFimPadTexts, spec, &spec->fim_pad_id);
  Detect(index, kFimRepTexts, spec, &spec->fim_rep_id);
  Detect(index, kFimSepTexts, spec, &spec->fim_sep_id);

  std::set<int32_t> eog;
  for (int32_t id : {spec->fim_pad_id, spec->fim_rep_id, spec->fim_sep_id}) {
    if (id >= 0) eog.insert(id);
  }
  for (std::string_view text : kEogTexts) {
    const int32_t id = Find(index, text);
    if (id < 0) continue;
    eog.insert(id);
    SetType(spec, id, TokenType::kControl);
  }
  for (std::string_view text : kRenderedTexts) {
    if (const int32_t id = Find(index, text); id >= 0) SetType(spec, id, TokenType::kUserDefined);
  }
  for (int32_t id : {spec->eos_id, spec->eot_id, spec->eom_id}) {
    if (id >= 0) eog.insert(id);
  }
  ApplyEogExceptions(spec, &eog);
  return {eog.begin(), eog.end()};
}

SpecialTokenSplitter::SpecialTokenSplitter(const TokenizerSpec& spec) {
  // llama.cpp strips whitespace after Phi-3's special tokens (by model name).
  const std::string name = absl::AsciiStrToLower(spec.name);
  const bool phi3 =
      name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;
  for (int32_t id = 0; id < static_cast<int32_t>(spec.tokens.size()); ++id) {
    const auto type = static_cast<TokenType>(spec.token_types[id]);
    const std::string& text = spec.tokens[id];
    if (text.empty()) continue;
    if (type != TokenType::kControl && type != TokenType::kUserDefined &&
        type != TokenType::kUnknown) {
      continue;
    }
    const bool rstrip = phi3 && text != "<unk>" && text != "<s>" && text != "<|endoftext|>";
    specials_.push_back({id, text, type == TokenType::kUserDefined, rstrip});
  }
  std::stable_sort(specials_.begin(), specials_.end(), [](const Special& a, const Special& b) {
    return a.text.size() > b.text.size();
  });
}

std::vector<Fragment> SpecialTokenSplitter::Split(std::string_view text, bool parse_special,
                                                  absl::Span<const TextRange> plain) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});
  for (const Special& s : specials_) {
    if (!parse_special && !s.user_defined) continue;
    SplitAt(text, s, s.user_defined ? absl::Span<const TextRange>() : plain, &fragments);
  }
  return fragments;
}

void SpecialTokenSplitter::SplitAt(std::string_view text, const Special& s,
                                   absl::Span<const TextRange> plain,
                                   std::vector<Fragment>* fragments) const {
  // True when [begin, end) overlaps a range of `plain`: the first range ending after begin
  // must start before end.
  auto in_plain = [plain](size_t begin, size_t end) {
    auto it = std::upper_bound(plain.begin(), plain.end(), begin,
                               [](size_t at, const TextRange& r) { return at < r.end; });
    return it != plain.end() && it->begin < end;
  };
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  std::vector<Fragment> out;
  out.reserve(fragments->size());
  for (const Fragment& f : *fragments) {
    if (f.id >= 0) {
      out.push_back(f);
      continue;
    }
    const size_t end = f.begin + f.len;
    const std::string_view window = text.substr(0, end);
    size_t cursor = f.begin;  // start of the text not yet emitted
    size_t search = f.begin;  // where the next occurrence may start
    while (search < end) {
      const size_t match = window.find(s.text, search);
      if (match == std::string_view::npos) break;
      if (in_plain(match, match + s.text.size())) {
        search = match + 1;
        continue;
      }
      if (match > cursor) out.push_back({-1, cursor, match - cursor});
      out.push_back({s.id, match, s.text.size()});
      cursor = match + s.text.size();
      if (s.rstrip) {
        while (cursor < end && is_space(text[cursor])) ++cursor;
      }
      search = cursor;
    }
    if (cursor < end) out.push_back({-1, cursor, end - cursor});
  }
  *fragments = std::move(out);
}

}  // namespace pagoda::model
