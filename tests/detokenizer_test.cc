// IncrementalDetokenizer: its deltas are valid UTF-8 and add up to Tokenizer::Decode.
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "tests/test_util.h"
#include "tests/tokenizer_test_util.h"

namespace pagoda::model {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

// Streams `ids`, checking each delta; returns the deltas and the flush concatenated.
std::string Stream(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  IncrementalDetokenizer detok(&tok);
  std::string text;
  for (int32_t id : ids) {
    const std::string delta = detok.Append(id);
    EXPECT_TRUE(IsValidUtf8(delta)) << "after id " << id;
    text += delta;
  }
  const std::string tail = detok.Flush();
  EXPECT_TRUE(IsValidUtf8(tail));
  return text + tail;
}

std::unique_ptr<Tokenizer> LoadStories() {
  auto file = gguf::GgufFile::Open(pagoda::testing::ModelPath("stories260K.gguf"));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

std::vector<int32_t> RandomIds(int vocab, int count, uint32_t seed, int lo = 0) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, vocab - 1);
  std::vector<int32_t> ids(count);
  for (auto& id : ids) id = dist(rng);
  return ids;
}

TEST(IncrementalDetokenizerTest, EmojiWaitsForItsLastByte) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  IncrementalDetokenizer detok(tok.get());
  // 😀 = F0 9F 98 80; byte b is token b + 3.
  EXPECT_EQ(detok.Append(0xF0 + 3), "");
  EXPECT_EQ(detok.Append(0x9F + 3), "");
  EXPECT_EQ(detok.Append(0x98 + 3), "");
  EXPECT_EQ(detok.Append(0x80 + 3), "\xF0\x9F\x98\x80");
  EXPECT_EQ(detok.Flush(), "");
  // Text before an unfinished character goes out at once.
  EXPECT_EQ(detok.Append(265), " the");
  EXPECT_EQ(detok.Append(0xE4 + 3), "");
  EXPECT_EQ(detok.Append(1), "");  // a control token adds nothing and completes nothing
  EXPECT_EQ(detok.Append(0xB8 + 3), "");
  EXPECT_EQ(detok.Append(0xAD + 3), "\xE4\xB8\xAD");  // 中
}

TEST(IncrementalDetokenizerTest, BrokenSequencesBecomeReplacements) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  IncrementalDetokenizer detok(tok.get());
  EXPECT_EQ(detok.Append(0xE4 + 3), "");
  // 'a' cannot continue E4: E4 becomes U+FFFD and 'a' goes out.
  EXPECT_EQ(detok.Append('a' + 3), std::string(kReplacement) + "a");
  EXPECT_EQ(detok.Append(0x80 + 3), kReplacement);  // a lone continuation byte
  EXPECT_EQ(detok.Append(0xFF + 3), kReplacement);  // never valid
  EXPECT_EQ(detok.Append(0xF0 + 3), "");
  EXPECT_EQ(detok.Append(0x9F + 3), "");
  EXPECT_EQ(detok.Flush(), std::string(kReplacement) + kReplacement);  // one per held byte
  EXPECT_EQ(detok.Flush(), "");
  // Overlong and surrogate forms are rejected at their second byte.
  EXPECT_EQ(detok.Append(0xC0 + 3), kReplacement);
  EXPECT_EQ(detok.Append(0xED + 3), "");
  EXPECT_EQ(detok.Append(0xA0 + 3), std::string(kReplacement) + kReplacement);
  EXPECT_EQ(tok->Decode({0xF0 + 3, 0x9F + 3, 'A' + 3}, false),
            std::string(kReplacement) + kReplacement + "A");
}

TEST(IncrementalDetokenizerTest, GoldenCasesStreamToDecode) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  const std::vector<std::string> texts = {
      "Hello world", "café naïve résumé", "中文测试", "日本語", "emoji 😀🎉", "\n\n", "x=1+2*3-4/5"};
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok->Encode(text, true);
    EXPECT_EQ(Stream(*tok, ids), tok->Decode(ids, false)) << text;
    EXPECT_EQ(Stream(*tok, ids), " " + text);
  }
}

TEST(IncrementalDetokenizerTest, RandomIdsStreamToDecodeLlama) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<int32_t> ids = RandomIds(tok->vocab_size(), 500, seed);
    const std::string decoded = tok->Decode(ids, false);
    EXPECT_TRUE(IsValidUtf8(decoded));
    EXPECT_EQ(Stream(*tok, ids), decoded) << "seed " << seed;
  }
  // Only byte tokens and a few pieces: mostly broken sequences, some whole characters.
  const std::vector<int32_t> bytes = RandomIds(259, 500, 7, /*lo=*/3);
  EXPECT_EQ(Stream(*tok, bytes), tok->Decode(bytes, false));
}

TEST(IncrementalDetokenizerTest, RandomIdsStreamToDecodeGpt2) {
  auto tok = MakeGpt2Tokenizer();
  ASSERT_NE(tok, nullptr);
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<int32_t> ids = RandomIds(tok->vocab_size(), 500, seed);
    const std::string decoded = tok->Decode(ids, false);
    EXPECT_TRUE(IsValidUtf8(decoded));
    EXPECT_EQ(Stream(*tok, ids), decoded) << "seed " << seed;
  }
  // Bytes drawn from the UTF-8 lead/continuation region complete characters more often.
  std::vector<int32_t> ids = RandomIds(256, 500, 11, /*lo=*/0x80);
  EXPECT_EQ(Stream(*tok, ids), tok->Decode(ids, false));
}

// Byte-level losslessness: the TokenBytes of Encode(text) spell text back exactly, even for
// random bytes that are not UTF-8 (llama: after its dummy-prefix space). The gpt2 tokenizer
// reads text as llama.cpp does, so it is lossless for valid UTF-8 only.
TEST(TokenizerBytesTest, RandomBytesEncodeLosslessly) {
  auto stories = LoadStories();
  auto gpt2 = MakeGpt2Tokenizer();
  ASSERT_NE(stories, nullptr);
  ASSERT_NE(gpt2, nullptr);
  std::mt19937 rng(99);
  for (int round = 0; round < 200; ++round) {
    std::string text(rng() % 40 + 1, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    for (const Tokenizer* tok : {stories.get(), gpt2.get()}) {
      std::string spelled;
      for (int32_t id : tok->Encode(text, true)) spelled += tok->TokenBytes(id);
      if (tok == stories.get()) {
        EXPECT_EQ(spelled, " " + text);
      } else if (IsValidUtf8(text)) {
        EXPECT_EQ(spelled, text);
      }
      EXPECT_TRUE(IsValidUtf8(tok->Decode(tok->Encode(text, true))));
    }
  }
}

TEST(IncrementalDetokenizerTest, EveryTextStreamsToItself) {
  auto tok = MakeGpt2Tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string text = "héllo 中文 😀🎉👍🏽 \x7f end";
  EXPECT_EQ(Stream(*tok, tok->Encode(text, false)), text);
}

}  // namespace
}  // namespace pagoda::model
