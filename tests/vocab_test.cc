// Real vocabularies against llama.cpp: every test string of llama.cpp's vocab tests
// (tests/data/vocab.tar.xz: ggml-vocab-*.gguf with .inp strings and llama.cpp's .out ids,
// tokenized without BOS and without parsing special tokens) must give exactly its ids.
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace pagoda::model {
namespace {

constexpr const char* kVocabs[] = {"llama-bpe", "qwen2", "llama-spm", "phi-3"};
constexpr int kStringsPerVocab = 46;

std::string VocabPath(const std::string& vocab) {
  return pagoda::testing::ModelsDir() + "/vocab/ggml-vocab-" + vocab + ".gguf";
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// The .inp strings (separated by "\n__ggml_vocab_test__\n") paired with the .out lines.
std::vector<VocabCase> LoadCases(const std::string& vocab) {
  const std::string inp = pagoda::testing::ReadFileOrDie(VocabPath(vocab) + ".inp");
  const std::string out = pagoda::testing::ReadFileOrDie(VocabPath(vocab) + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::vector<VocabCase> cases;
  if (lines.size() != texts.size()) return cases;  // the count test reports it
  for (size_t i = 0; i < texts.size(); ++i) {
    VocabCase c{texts[i], {}};
    for (absl::string_view field : absl::StrSplit(lines[i], ' ', absl::SkipWhitespace())) {
      int32_t id = 0;
      EXPECT_TRUE(absl::SimpleAtoi(field, &id)) << field;
      c.ids.push_back(id);
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

// Loaded once per vocabulary (the BPE files hold 128k-152k tokens).
struct Loaded {
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<VocabCase> cases;
};

const Loaded& Load(const std::string& vocab) {
  static auto* cache = new std::map<std::string, Loaded>();
  auto it = cache->find(vocab);
  if (it != cache->end()) return it->second;
  Loaded loaded;
  auto file = gguf::GgufFile::Open(VocabPath(vocab));
  EXPECT_TRUE(file.ok()) << file.status();
  if (file.ok()) {
    auto tok = Tokenizer::FromGguf(**file);
    EXPECT_TRUE(tok.ok()) << tok.status();
    if (tok.ok()) loaded.tokenizer = *std::move(tok);
  }
  loaded.cases = LoadCases(vocab);
  return cache->emplace(vocab, std::move(loaded)).first->second;
}

TEST(VocabFilesTest, EveryVocabularyHasAllStrings) {
  for (const char* vocab : kVocabs) {
    EXPECT_EQ(Load(vocab).cases.size(), static_cast<size_t>(kStringsPerVocab)) << vocab;
  }
}

class VocabTest : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(VocabTest, MatchesLlamaCpp) {
  const auto& [vocab, index] = GetParam();
  const Loaded& loaded = Load(vocab);
  ASSERT_NE(loaded.tokenizer, nullptr);
  ASSERT_LT(static_cast<size_t>(index), loaded.cases.size());
  const VocabCase& c = loaded.cases[index];
  EXPECT_EQ(loaded.tokenizer->Encode(c.text, /*add_bos=*/false, /*parse_special=*/false), c.ids)
      << vocab << " string " << index << ": \"" << c.text << "\"";
}

INSTANTIATE_TEST_SUITE_P(AllStrings, VocabTest,
                         ::testing::Combine(::testing::ValuesIn(kVocabs),
                                            ::testing::Range(0, kStringsPerVocab)),
                         [](const ::testing::TestParamInfo<VocabTest::ParamType>& info) {
                           std::string name = std::get<0>(info.param);
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name + "_" + std::to_string(std::get<1>(info.param));
                         });

// Every pre-tokenizer against llama.cpp: the Llama 3 vocabulary with tokenizer.ggml.pre set to
// each value (tests/data/pretokenizer_variants.json, made with llama-tokenize on such copies),
// 71 strings each (the vocab test strings plus scripts, cases, digits, whitespace, marks).
class PreTokenizerVariantTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PreTokenizerVariantTest, MatchesLlamaCpp) {
  const std::string pre = GetParam();
  const nlohmann::json json = nlohmann::json::parse(
      pagoda::testing::ReadFileOrDie(pagoda::testing::ModelPath("pretokenizer_variants.json")));
  const auto strings = json.at("strings").get<std::vector<std::string>>();
  const auto ids = json.at("ids").at(pre).get<std::vector<std::vector<int32_t>>>();
  ASSERT_EQ(strings.size(), 71u);
  ASSERT_EQ(ids.size(), strings.size());
  auto file = gguf::GgufFile::Open(VocabPath("llama-bpe"));
  ASSERT_TRUE(file.ok()) << file.status();
  gguf::GgufWriter writer((*file)->version(), (*file)->alignment());
  for (const auto& [key, value] : (*file)->metadata()) {
    if (key != "tokenizer.ggml.pre") writer.AddValue(key, value);
  }
  writer.AddString("tokenizer.ggml.pre", pre);
  auto copy = gguf::GgufFile::FromBytes(writer.Serialize());
  ASSERT_TRUE(copy.ok()) << copy.status();
  auto tok = Tokenizer::FromGguf(**copy);
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (size_t i = 0; i < strings.size(); ++i) {
    EXPECT_EQ((*tok)->Encode(strings[i], /*add_bos=*/false, /*parse_special=*/false), ids[i])
        << pre << " string " << i << ": \"" << strings[i] << "\"";
  }
}

INSTANTIATE_TEST_SUITE_P(AllPreTokenizers, PreTokenizerVariantTest,
                         ::testing::Values("default", "gpt-2", "llama-bpe", "qwen2", "smollm",
                                           "deepseek-llm", "tekken"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace pagoda::model
