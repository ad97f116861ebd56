// Special tokens and end-of-generation against llama.cpp (tests/data/vocab_special.json,
// made with llama-tokenize), special-token splitting on hand-built vocabularies, the
// pre-tokenizers chosen by tokenizer.ggml.pre, and an unknown pre-tokenizer.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/pretokenizer.h"
#include "model/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"
#include "tests/tokenizer_test_util.h"

namespace pagoda::model {
namespace {

using ::testing::ElementsAre;

std::unique_ptr<Tokenizer> LoadVocab(const std::string& file_name) {
  auto file = gguf::GgufFile::Open(pagoda::testing::ModelsDir() + "/vocab/" + file_name);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

// Per vocabulary: BOS/EOS ids, add_bos, the EOG set, "Hi" with BOS as the model adds it, and
// ten strings with parse_special on and off (no BOS), exactly as llama.cpp gives them.
TEST(VocabSpecialTest, MatchesLlamaCpp) {
  const nlohmann::json json = nlohmann::json::parse(
      pagoda::testing::ReadFileOrDie(pagoda::testing::ModelPath("vocab_special.json")));
  ASSERT_EQ(json.size(), 4u);
  for (const auto& [file_name, v] : json.items()) {
    SCOPED_TRACE(file_name);
    std::unique_ptr<Tokenizer> tok = LoadVocab(file_name);
    ASSERT_NE(tok, nullptr);
    EXPECT_EQ(tok->bos_id(), v.at("bos").get<int32_t>());
    EXPECT_EQ(tok->eos_id(), v.at("eos").get<int32_t>());
    EXPECT_EQ(tok->add_bos(), v.at("add_bos").get<bool>());
    EXPECT_EQ(tok->eog_ids(), v.at("eog_ids").get<std::vector<int32_t>>());
    for (int32_t id : tok->eog_ids()) EXPECT_TRUE(tok->IsEog(id)) << id;
    if (tok->bos_id() != tok->eos_id()) {  // qwen2: the same token
      EXPECT_FALSE(tok->IsEog(tok->bos_id()));
    }
    EXPECT_EQ(tok->Encode("Hi", tok->add_bos(), /*parse_special=*/true),
              v.at("tokenize_Hi_with_add_special").get<std::vector<int32_t>>());
    ASSERT_EQ(v.at("cases").size(), 20u);  // 10 strings, parse_special on and off
    for (const auto& c : v.at("cases")) {
      const std::string text = c.at("text").get<std::string>();
      const bool parse_special = c.at("parse_special").get<bool>();
      EXPECT_EQ(tok->Encode(text, /*add_bos=*/false, parse_special),
                c.at("token_ids").get<std::vector<int32_t>>())
          << "parse_special=" << parse_special << " text: " << text;
    }
  }
}

TEST(VocabSpecialTest, Llama3ChatHeaderIsSeventeenTokensWithParsing) {
  std::unique_ptr<Tokenizer> tok = LoadVocab("ggml-vocab-llama-bpe.gguf");
  ASSERT_NE(tok, nullptr);
  const std::string chat =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nHello<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  const std::vector<int32_t> parsed = tok->Encode(chat, /*add_bos=*/false, true);
  EXPECT_THAT(parsed, ElementsAre(128000, 128006, 9125, 128007, 271, 9906, 128009, 128006, 882,
                                  128007, 271, 13347, 128009, 128006, 78191, 128007, 271));
  const std::vector<int32_t> plain = tok->Encode(chat, /*add_bos=*/false, false);
  EXPECT_GT(plain.size(), 40u);
  for (int32_t id : plain) EXPECT_LT(id, 128000);
}

TEST(SpecialTokenSplitTest, ControlOnlyWithParseSpecialUserDefinedAlways) {
  auto tok = MakeGpt2Tokenizer();  // <|endoftext|> 263 control, <tag> 264 user-defined
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("hell<|endoftext|>hell", false, true), ElementsAre(258, 263, 258));
  const std::vector<int32_t> plain = tok->Encode("hell<|endoftext|>hell", false, false);
  EXPECT_EQ(plain.size(), 2u + 13u);
  EXPECT_THAT(tok->Encode("x<tag>y", false, false), ElementsAre('x', 264, 'y'));
  EXPECT_THAT(tok->Encode("<tag><tag>", false, true), ElementsAre(264, 264));
  EXPECT_THAT(tok->Encode("<|endoftext|>", true, true), ElementsAre(263));  // no BOS id
}

TEST(SpecialTokenSplitTest, LongestSpecialTextWins) {
  TokenizerSpec spec = MakeGpt2Spec();
  spec.tokens.push_back("<tag>x");  // 265, longer than <tag>
  spec.token_types.push_back(static_cast<int32_t>(TokenType::kControl));
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("<tag>x<tag>", false, true), ElementsAre(265, 264));
  EXPECT_THAT((*tok)->Encode("<tag>x<tag>", false, false), ElementsAre(264, 'x', 264));
}

TEST(SpecialTokenSplitTest, LlamaAddsDummyPrefixAfterSpecialTokens) {
  auto tok = MakeLlamaTokenizer({{"\xE2\x96\x81"
                                  "a",
                                  1.f}},
                                /*add_space_prefix=*/true);
  ASSERT_NE(tok, nullptr);
  const int32_t a = kLlamaFirstPiece;  // "▁a"
  // "a</s>a": each text fragment starts after BOS/a special token, so each gets "▁".
  EXPECT_THAT(tok->Encode("a</s>a", true, true), ElementsAre(1, a, 2, a));
  EXPECT_EQ(tok->Encode("a</s>a", true, false).size(), 1u + 1u + 5u);
}

TEST(EogTest, EndMarkerTextMakesControlEogTokens) {
  TokenizerSpec spec = MakeGpt2Spec();
  for (const char* text : {"<|im_end|>", "<|eom_id|>", "<|fim_pad|>", "<|im_start|>"}) {
    spec.tokens.push_back(text);  // 265..268, normal type in the spec
    spec.token_types.push_back(static_cast<int32_t>(TokenType::kNormal));
  }
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // EOS, <|endoftext|> (the same), <|im_end|>, <|eom_id|>, and <|fim_pad|> (FIM pad is EOG).
  EXPECT_EQ((*tok)->eog_ids(), (std::vector<int32_t>{kGpt2Eos, 265, 266, 267}));
  EXPECT_TRUE((*tok)->IsControl(265));
  EXPECT_FALSE((*tok)->IsEog(268));
  EXPECT_FALSE((*tok)->IsControl(268));
  EXPECT_FALSE((*tok)->IsEog(-1));
  EXPECT_EQ((*tok)->TokenBytes(265), "");
}

TEST(PreTokenizerTest, UnknownPreIsALoadErrorNamingIt) {
  TokenizerSpec spec = MakeGpt2Spec();
  spec.pre = "xyz";
  auto tok = Tokenizer::Create(spec);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tok.status().message(), "tokenizer: unknown pre-tokenizer 'xyz'");

  gguf::GgufWriter writer;
  writer.AddString("tokenizer.ggml.model", "gpt2");
  writer.AddString("tokenizer.ggml.pre", "xyz");
  writer.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
  writer.AddStringArray("tokenizer.ggml.merges", {"a b"});
  auto file = gguf::GgufFile::FromBytes(writer.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  auto from_gguf = Tokenizer::FromGguf(**file);
  ASSERT_FALSE(from_gguf.ok());
  EXPECT_EQ(from_gguf.status().message(), "tokenizer: unknown pre-tokenizer 'xyz'");
}

TEST(PreTokenizerTest, NamesAndFlags) {
  for (const char* name : {"", "default", "gpt-2", "llama-bpe", "llama3", "falcon3", "qwen2",
                           "smollm", "deepseek-llm", "tekken", "deepseek-r1-qwen"}) {
    EXPECT_TRUE(LookupPreTokenizer(name).ok()) << name;
  }
  EXPECT_EQ(LookupPreTokenizer("").value().type, PreTokenizer::kDefault);
  EXPECT_EQ(LookupPreTokenizer("llama3").value().type, PreTokenizer::kLlama3);
  EXPECT_TRUE(LookupPreTokenizer("llama-bpe").value().ignore_merges);
  EXPECT_TRUE(LookupPreTokenizer("llama-bpe").value().add_bos);
  EXPECT_TRUE(LookupPreTokenizer("tekken").value().ignore_merges);
  EXPECT_FALSE(LookupPreTokenizer("qwen2").value().ignore_merges);
  EXPECT_FALSE(LookupPreTokenizer("qwen2").value().add_bos);
  EXPECT_FALSE(LookupPreTokenizer("dbrx").value().ignore_merges);
  EXPECT_EQ(LookupPreTokenizer("dbrx").value().type, PreTokenizer::kLlama3);
  EXPECT_FALSE(LookupPreTokenizer("Llama-BPE").ok());
}

TEST(PreTokenizerTest, Llama3AndQwen2Split) {
  EXPECT_THAT(PreTokenize(PreTokenizer::kLlama3, "1234567 I'M  x\r\n\n  y"),
              ElementsAre("123", "456", "7", " I", "'M", " ", " x", "\r\n\n", " ", " y"));
  EXPECT_THAT(PreTokenize(PreTokenizer::kQwen2, "x123 (a)\n"),
              ElementsAre("x", "1", "2", "3", " (", "a", ")\n"));
}

TEST(PreTokenizerTest, DefaultSplitsPunctuationThenGpt2ThenDigits) {
  EXPECT_THAT(
      PreTokenize(PreTokenizer::kDefault, "Hello, world! it's 12345 `x`"),
      ElementsAre("Hello", ",", " world", "!", " it", "'", "s", " ", "123", "45", " `", "x", "`"));
}

TEST(PreTokenizerTest, SmollmSplitsSingleDigits) {
  EXPECT_THAT(PreTokenize(PreTokenizer::kSmollm, "ab 123 c"),
              ElementsAre("ab", " ", "1", "2", "3", " c"));
}

TEST(PreTokenizerTest, TekkenSplitsByCase) {
  EXPECT_THAT(
      PreTokenize(PreTokenizer::kTekken,
                  "HelloWorld ABCdef \xC3\xA9"
                  "A 123 x/\n"),
      ElementsAre("Hello", "World", " ABCdef", " \xC3\xA9", "A", " ", "1", "2", "3", " x", "/\n"));
}

TEST(PreTokenizerTest, DeepseekLlmSplitsScripts) {
  EXPECT_THAT(PreTokenize(PreTokenizer::kDeepseekLlm, "Hello \xE4\xB8\x96\xE7\x95\x8C\n123 ok  "),
              ElementsAre("Hello", " ", "\xE4\xB8\x96\xE7\x95\x8C", "\n", "123", " ok", "  "));
}

}  // namespace
}  // namespace pagoda::model
