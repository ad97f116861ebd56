#include "model/pretokenizer.h"

#include <initializer_list>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/pretokenizer_patterns.h"
#include "model/unicode_class.h"
#include "model/utf8.h"

namespace pagoda::model {
namespace {

using pretok::CpText;

// One step of a pipeline: a hand-written splitter, or a matcher searched leftmost-first.
struct Step {
  enum Kind { kGpt2, kLlama3, kQwen2, kSearch } kind;
  pretok::Matcher matcher = nullptr;
};

// Splits [begin, end) by leftmost matches of `matcher`: each match and each stretch between
// matches is a word (what llama.cpp does with std::regex_iterator).
void SplitBySearch(const CpText& t, size_t begin, size_t end, pretok::Matcher matcher,
                   std::vector<size_t>* lengths) {
  size_t done = begin;
  for (size_t pos = begin; pos < end;) {
    const size_t match_end = matcher(t, pos, end);
    if (match_end == pos) {
      ++pos;
      continue;
    }
    if (pos > done) lengths->push_back(pos - done);
    lengths->push_back(match_end - pos);
    done = pos = match_end;
  }
  if (end > done) lengths->push_back(end - done);
}

std::vector<size_t> ApplyStep(const CpText& t, const Step& step, const std::vector<size_t>& in) {
  std::vector<size_t> out;
  out.reserve(in.size());
  size_t begin = 0;
  for (size_t len : in) {
    const size_t end = begin + len;
    switch (step.kind) {
      case Step::kGpt2:
        pretok::SplitGpt2(t, begin, end, &out);
        break;
      case Step::kLlama3:
        pretok::SplitLlama3(t, begin, end, 3, &out);
        break;
      case Step::kQwen2:
        pretok::SplitLlama3(t, begin, end, 1, &out);
        break;
      case Step::kSearch:
        SplitBySearch(t, begin, end, step.matcher, &out);
        break;
    }
    begin = end;
  }
  return out;
}

std::vector<Step> Pipeline(PreTokenizer type) {
  const Step kGpt2Step{Step::kGpt2};
  switch (type) {
    case PreTokenizer::kDefault:
      return {{Step::kSearch, pretok::MatchDefaultPunctuation},
              kGpt2Step,
              {Step::kSearch, pretok::MatchNumberRun},
              {Step::kSearch, pretok::MatchThreeDigits}};
    case PreTokenizer::kGpt2:
      return {kGpt2Step};
    case PreTokenizer::kLlama3:
      return {{Step::kLlama3}};
    case PreTokenizer::kQwen2:
      return {{Step::kQwen2}};
    case PreTokenizer::kSmollm:
      return {{Step::kSearch, pretok::MatchNumber}, kGpt2Step};
    case PreTokenizer::kDeepseekLlm:
      return {{Step::kSearch, pretok::MatchNewline},
              {Step::kSearch, pretok::MatchDeepseekLetters},
              {Step::kSearch, pretok::MatchDeepseekPunctuation},
              {Step::kSearch, pretok::MatchTrailingSpace},
              {Step::kSearch, pretok::MatchDeepseekCjk},
              {Step::kSearch, pretok::MatchNumberRun}};
    case PreTokenizer::kTekken:
      return {{Step::kSearch, pretok::MatchTekken}};
  }
  return {};
}

bool OneOf(std::string_view pre, std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    if (pre == name) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<PreTokenizerConfig> LookupPreTokenizer(std::string_view pre) {
  PreTokenizerConfig config;
  if (pre.empty() || pre == "default") {
    config.type = PreTokenizer::kDefault;
  } else if (OneOf(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                         "midm-2.0", "lfm2", "jina-v5-nano", "dbrx", "smaug-bpe"})) {
    config.type = PreTokenizer::kLlama3;
    // dbrx and smaug-bpe share the pattern but not the flags.
    config.ignore_merges = config.add_bos = !OneOf(pre, {"dbrx", "smaug-bpe"});
  } else if (OneOf(pre, {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "a.x-4.0", "mellum",
                         "mpt", "olmo", "jais", "exaone4", "trillion", "granite-docling"})) {
    config.type = PreTokenizer::kGpt2;
  } else if (OneOf(pre, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2",
                         "hunyuan", "solar-open"})) {
    config.type = PreTokenizer::kQwen2;
  } else if (OneOf(pre, {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone",
                         "minerva-7b", "mellum2"})) {
    config.type = PreTokenizer::kSmollm;
  } else if (pre == "deepseek-llm") {
    config.type = PreTokenizer::kDeepseekLlm;
  } else if (pre == "tekken") {
    config.type = PreTokenizer::kTekken;
    config.ignore_merges = config.add_bos = true;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: unknown pre-tokenizer '", std::string(pre), "'"));
  }
  return config;
}

std::vector<std::string> PreTokenize(PreTokenizer type, std::string_view text) {
  CpText t;
  t.cps = DecodeCodePoints(text);
  t.flags.reserve(t.cps.size());
  for (uint32_t cp : t.cps) t.flags.push_back(CodePointFlags(cp));
  std::vector<size_t> lengths;
  if (!t.cps.empty()) lengths.push_back(t.cps.size());
  for (const Step& step : Pipeline(type)) lengths = ApplyStep(t, step, lengths);
  std::vector<std::string> words;
  words.reserve(lengths.size());
  size_t begin = 0;
  for (size_t len : lengths) {
    std::string& word = words.emplace_back();
    for (size_t i = begin; i < begin + len; ++i) AppendUtf8(t.cps[i], &word);
    begin += len;
  }
  return words;
}

}  // namespace pagoda::model
