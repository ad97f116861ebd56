// Tokenizer tests: the llama tokenizer against llama.cpp's ids for stories260K, hand-built
// llama specs, spec validation, FromGguf, and the incremental detokenizer. The gpt2
// tokenizer has its own file (gpt2_tokenizer_test.cc).
#include "model/tokenizer.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"
#include "tests/tokenizer_test_util.h"

namespace pagoda::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Tokenizer> LoadStories() {
  auto file = gguf::GgufFile::Open(pagoda::testing::ModelPath("stories260K.gguf"));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto tokenizer = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

struct GoldenCase {
  std::string text;
  std::vector<int32_t> ids;
  std::string detokenized;
};

std::vector<GoldenCase> LoadGolden() {
  const std::string raw =
      pagoda::testing::ReadFileOrDie(pagoda::testing::ModelPath("stories260K.tokenizer.json"));
  const nlohmann::json json = nlohmann::json::parse(raw);
  std::vector<GoldenCase> cases;
  for (const auto& c : json.at("cases")) {
    cases.push_back({c.at("text").get<std::string>(), c.at("token_ids").get<std::vector<int32_t>>(),
                     c.at("detokenized").get<std::string>()});
  }
  return cases;
}

class StoriesTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = LoadStories();
    ASSERT_NE(tok_, nullptr);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(StoriesTokenizerTest, Metadata) {
  EXPECT_EQ(tok_->model(), "llama");
  EXPECT_EQ(tok_->vocab_size(), 512);
  EXPECT_EQ(tok_->bos_id(), 1);
  EXPECT_EQ(tok_->eos_id(), 2);
  EXPECT_TRUE(tok_->add_bos());
  EXPECT_TRUE(tok_->IsControl(1));
  EXPECT_TRUE(tok_->IsControl(2));
  EXPECT_FALSE(tok_->IsControl(0));
  EXPECT_FALSE(tok_->IsControl(410));
  EXPECT_FALSE(tok_->IsControl(512));
  EXPECT_EQ(tok_->Piece(410), "\xE2\x96\x81");
  EXPECT_EQ(tok_->Piece(13), "<0x0A>");
  EXPECT_EQ(tok_->Piece(512), "");
  EXPECT_EQ(tok_->Piece(-1), "");
}

TEST_F(StoriesTokenizerTest, TokenBytes) {
  EXPECT_EQ(tok_->TokenBytes(265), " the");
  EXPECT_EQ(tok_->TokenBytes(13), "\n");
  EXPECT_EQ(tok_->TokenBytes(3), std::string(1, '\0'));
  EXPECT_EQ(tok_->TokenBytes(258), "\xFF");
  EXPECT_EQ(tok_->TokenBytes(1), "");    // control
  EXPECT_EQ(tok_->TokenBytes(0), "");    // <unk>
  EXPECT_EQ(tok_->TokenBytes(512), "");  // out of range
  EXPECT_EQ(tok_->TokenBytes(-5), "");
}

TEST_F(StoriesTokenizerTest, GoldenEncode) {
  const std::vector<GoldenCase> cases = LoadGolden();
  ASSERT_EQ(cases.size(), 20u);
  for (const GoldenCase& c : cases) {
    EXPECT_EQ(tok_->Encode(c.text, /*add_bos=*/false), c.ids) << "text: " << c.text;
  }
}

TEST_F(StoriesTokenizerTest, GoldenDecode) {
  for (const GoldenCase& c : LoadGolden()) {
    EXPECT_EQ(tok_->Decode(c.ids, /*strip_leading_space=*/false), c.detokenized);
    EXPECT_EQ(tok_->Decode(c.ids, /*strip_leading_space=*/true), c.text);
  }
}

TEST_F(StoriesTokenizerTest, GoldenRoundTrip) {
  for (const GoldenCase& c : LoadGolden()) {
    EXPECT_EQ(tok_->Decode(tok_->Encode(c.text, false), true), c.text);
    EXPECT_EQ(tok_->Decode(tok_->Encode(c.text, true), true), c.text);
  }
}

TEST_F(StoriesTokenizerTest, BosAndEmptyText) {
  EXPECT_THAT(tok_->Encode("Hello world", true), ElementsAre(1, 346, 306, 414, 263, 304, 341));
  EXPECT_TRUE(tok_->Encode("", false).empty());
  EXPECT_THAT(tok_->Encode("", true), ElementsAre(1));
  EXPECT_EQ(tok_->Decode({1, 346, 306, 414, 263, 304, 341, 2}), "Hello world");
  EXPECT_EQ(tok_->Decode({}), "");
}

TEST_F(StoriesTokenizerTest, ByteFallback) {
  // "▁" then <0x01> and <0x7F> (byte b is id b + 3).
  EXPECT_THAT(tok_->Encode("\x01\x7f", false), ElementsAre(410, 4, 130));
  // U+D55C (한) = ED 95 9C.
  EXPECT_THAT(tok_->Encode("\xED\x95\x9C", false), ElementsAre(410, 240, 152, 159));
}

TEST_F(StoriesTokenizerTest, RoundTrips) {
  const std::vector<std::string> texts = {
      "Once upon a time, there was a little girl named Lily.",
      "\x01\x7f control bytes \x1b[0m",
      "中文测试，繁體字",
      "한국어 텍스트",
      "\xF0\xA0\x9C\x8E rare CJK (U+2070E)",
      "emoji 😀🎉👍🏽 and 👨‍👩‍👧",
      "  two leading spaces",
      "trailing spaces   ",
      "mixed\ttabs\nand\r\nnewlines",
      " ",
      "x",
  };
  for (const std::string& text : texts) {
    EXPECT_EQ(tok_->Decode(tok_->Encode(text, true)), text) << text;
  }
}

TEST_F(StoriesTokenizerTest, InvalidUtf8InputDecodesToReplacement) {
  // A lone 0xFF byte is encoded by byte fallback; decoding gives valid UTF-8.
  const std::vector<int32_t> ids = tok_->Encode("a\xFF", false);
  EXPECT_THAT(ids, ElementsAre(261, 258));
  EXPECT_EQ(tok_->Decode(ids, false), " a\xEF\xBF\xBD");
}

TEST_F(StoriesTokenizerTest, StripOnlyOneDummySpace) {
  EXPECT_EQ(tok_->Decode(tok_->Encode(" x", false), true), " x");
  EXPECT_EQ(tok_->Decode(tok_->Encode(" x", false), false), "  x");
  // Leading control tokens do not hide the dummy space.
  EXPECT_EQ(tok_->Decode({1, 1, 265}, true), "the");
}

// ---- Hand-built llama vocabularies ----

TEST(LlamaTokenizerTest, HighestScoreMergesFirst) {
  // "abc": "ab" and "bc" compete for b; the better score wins.
  auto tok = MakeLlamaTokenizer({{"ab", -1.0f}, {"bc", -2.0f}}, /*add_space_prefix=*/false);
  EXPECT_THAT(tok->Encode("abc", false), ElementsAre(kLlamaFirstPiece + 0, 'c' + 3));
  tok = MakeLlamaTokenizer({{"ab", -2.0f}, {"bc", -1.0f}}, false);
  EXPECT_THAT(tok->Encode("abc", false), ElementsAre('a' + 3, kLlamaFirstPiece + 1));
}

TEST(LlamaTokenizerTest, EqualScoresMergeLeftmostFirst) {
  auto tok = MakeLlamaTokenizer({{"aa", -1.0f}}, false);
  const int32_t aa = kLlamaFirstPiece;
  EXPECT_THAT(tok->Encode("aaa", false), ElementsAre(aa, 'a' + 3));
  EXPECT_THAT(tok->Encode("aaaaa", false), ElementsAre(aa, aa, 'a' + 3));
}

TEST(LlamaTokenizerTest, MergesChainAndSpacePrefix) {
  // Pieces: ▁ (0), h (1), i (2), hi (3), ▁hi (4).
  auto tok = MakeLlamaTokenizer({{"\xE2\x96\x81", -5.0f},
                                 {"h", -6.0f},
                                 {"i", -7.0f},
                                 {"hi", -1.0f},
                                 {"\xE2\x96\x81hi", -2.0f}},
                                /*add_space_prefix=*/true);
  const int32_t p = kLlamaFirstPiece;
  EXPECT_THAT(tok->Encode("hi hi", false), ElementsAre(p + 4, p + 4));
  EXPECT_THAT(tok->Encode("hi", true), ElementsAre(1, p + 4));
  EXPECT_EQ(tok->Decode(tok->Encode("hi hi", true)), "hi hi");
  // Without the prefix option no space is added, and Decode strips nothing.
  tok = MakeLlamaTokenizer({{"\xE2\x96\x81", -5.0f}, {"h", -6.0f}}, false);
  EXPECT_THAT(tok->Encode("h", false), ElementsAre(p + 1));
  EXPECT_EQ(tok->Decode({p + 0, p + 1}, true), " h");
}

TEST(LlamaTokenizerTest, MissingByteTokensGiveOneUnknown) {
  TokenizerSpec spec;
  spec.model = "llama";
  spec.tokens = {"<unk>", "<s>", "</s>", "a"};
  spec.scores = {0, 0, 0, -1};
  spec.token_types = {2, 3, 3, 1};
  spec.unk_id = 0;
  spec.add_space_prefix = false;
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("a\xC3\xA9"
                             "a",
                             false),
              ElementsAre(3, 0, 3));
  EXPECT_EQ((*tok)->Decode({3, 0, 3}), "aa");  // <unk> decodes to nothing
}

TEST(LlamaTokenizerTest, ControlPiecesAreNeverProducedByText) {
  TokenizerSpec spec;
  spec.model = "llama";
  spec.tokens = {"<unk>", "<s>", "</s>", "<", "s", ">", "<s"};
  spec.scores = {0, 0, 0, -1, -1, -1, -1};
  spec.token_types = {2, 3, 3, 1, 1, 1, 1};
  spec.add_space_prefix = false;
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("<s>", false), ElementsAre(6, 5));
}

TEST(LlamaTokenizerTest, TypesInferredWhenAbsent) {
  TokenizerSpec spec;
  spec.model = "llama";
  spec.tokens = {"<unk>", "<s>", "</s>", "<0x41>", "\xE2\x96\x81"};
  spec.scores = {0, 0, 0, 0, 0};
  spec.bos_id = 1;
  spec.eos_id = 2;
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE((*tok)->IsControl(1));
  EXPECT_TRUE((*tok)->IsControl(2));
  EXPECT_FALSE((*tok)->IsControl(0));
  EXPECT_EQ((*tok)->TokenBytes(3), "A");
  EXPECT_THAT((*tok)->Encode("A", true), ElementsAre(1, 4, 3));
}

// ---- Spec validation ----

void ExpectInvalid(const TokenizerSpec& spec, const std::string& message_part) {
  auto tok = Tokenizer::Create(spec);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << tok.status();
  EXPECT_THAT(tok.status().message(), HasSubstr(message_part));
}

TEST(TokenizerSpecTest, RejectsMalformedSpecs) {
  const TokenizerSpec good = MakeLlamaSpec({{"ab", -1.0f}}, true);
  ASSERT_TRUE(Tokenizer::Create(good).ok());
  TokenizerSpec spec = good;
  spec.tokens.clear();
  spec.scores.clear();
  spec.token_types.clear();
  ExpectInvalid(spec, "empty");
  spec = good;
  spec.scores.pop_back();
  ExpectInvalid(spec, "scores");
  spec = good;
  spec.scores.clear();
  ExpectInvalid(spec, "scores");
  spec = good;
  spec.token_types.push_back(1);
  ExpectInvalid(spec, "token types");
  spec = good;
  spec.token_types[5] = 9;
  ExpectInvalid(spec, "unknown type 9");
  spec = good;
  spec.bos_id = static_cast<int32_t>(good.tokens.size());
  ExpectInvalid(spec, "bos id");
  spec = good;
  spec.eos_id = -2;
  ExpectInvalid(spec, "eos id");
  spec = good;
  spec.unk_id = 100000;
  ExpectInvalid(spec, "unknown-token id");
  spec = good;
  spec.model = "foo";
  ExpectInvalid(spec, "unsupported model \"foo\"");
  spec = MakeGpt2Spec();
  spec.merges.push_back("nospace");
  ExpectInvalid(spec, "merge");
  spec = MakeGpt2Spec();
  spec.merges.push_back("a ");
  ExpectInvalid(spec, "merge");
}

// ---- FromGguf ----

gguf::GgufWriter Gpt2Writer(std::string_view model = "gpt2") {
  const TokenizerSpec spec = MakeGpt2Spec();
  gguf::GgufWriter writer;
  writer.AddString("tokenizer.ggml.model", model);
  writer.AddStringArray("tokenizer.ggml.tokens", spec.tokens);
  writer.AddStringArray("tokenizer.ggml.merges", spec.merges);
  writer.AddInt32Array("tokenizer.ggml.token_type", spec.token_types);
  writer.AddUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(spec.eos_id));
  writer.AddUint32("tokenizer.ggml.unknown_token_id", 0xFFFFFFFFu);
  return writer;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> FromWriter(const gguf::GgufWriter& writer) {
  auto file = gguf::GgufFile::FromBytes(writer.Serialize());
  if (!file.ok()) return file.status();
  return Tokenizer::FromGguf(**file);
}

TEST(TokenizerGgufTest, ReadsGpt2Tokenizer) {
  auto tok = FromWriter(Gpt2Writer());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->model(), "gpt2");
  EXPECT_FALSE((*tok)->add_bos());  // gpt2 default (no pre: "default")
  EXPECT_EQ((*tok)->bos_id(), 11);  // llama.cpp's gpt2 default without the key
  EXPECT_EQ((*tok)->eos_id(), kGpt2Eos);
  EXPECT_TRUE((*tok)->IsControl(kGpt2Eos));
  EXPECT_THAT((*tok)->Encode("hello world", (*tok)->add_bos()), ElementsAre(262, 261, 'l', 'd'));
}

TEST(TokenizerGgufTest, ReadsFlags) {
  gguf::GgufWriter writer = Gpt2Writer();
  writer.AddBool("tokenizer.ggml.add_bos_token", true);
  writer.AddUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(kGpt2Eos));
  auto tok = FromWriter(writer);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->bos_id(), kGpt2Eos);
}

TEST(TokenizerGgufTest, RejectsMissingOrMistypedKeys) {
  const TokenizerSpec spec = MakeGpt2Spec();
  auto expect_invalid = [](const gguf::GgufWriter& writer, const std::string& part) {
    auto tok = FromWriter(writer);
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << tok.status();
    EXPECT_THAT(tok.status().message(), HasSubstr(part));
  };
  gguf::GgufWriter no_model;
  no_model.AddStringArray("tokenizer.ggml.tokens", spec.tokens);
  expect_invalid(no_model, "tokenizer.ggml.model");
  gguf::GgufWriter no_tokens;
  no_tokens.AddString("tokenizer.ggml.model", "gpt2");
  no_tokens.AddStringArray("tokenizer.ggml.merges", spec.merges);
  expect_invalid(no_tokens, "tokenizer.ggml.tokens");
  gguf::GgufWriter no_merges;
  no_merges.AddString("tokenizer.ggml.model", "gpt2");
  no_merges.AddStringArray("tokenizer.ggml.tokens", spec.tokens);
  expect_invalid(no_merges, "tokenizer.ggml.merges");
  gguf::GgufWriter tokens_as_string;
  tokens_as_string.AddString("tokenizer.ggml.model", "gpt2");
  tokens_as_string.AddString("tokenizer.ggml.tokens", "a");
  expect_invalid(tokens_as_string, "tokenizer.ggml.tokens");
  gguf::GgufWriter bad_bos = Gpt2Writer();
  bad_bos.AddUint32("tokenizer.ggml.bos_token_id", 100000);
  expect_invalid(bad_bos, "bos id");
  gguf::GgufWriter llama_no_scores;
  llama_no_scores.AddString("tokenizer.ggml.model", "llama");
  llama_no_scores.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
  expect_invalid(llama_no_scores, "scores");
  expect_invalid(Gpt2Writer("foo"), "unsupported model");
}

}  // namespace
}  // namespace pagoda::model
