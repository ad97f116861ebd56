// The gpt2 (byte-level BPE) tokenizer on a hand-built vocabulary, and its pre-tokenizer.
#include "model/gpt2_tokenizer.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/pretokenizer.h"
#include "model/unicode_class.h"
#include "tests/tokenizer_test_util.h"

namespace pagoda::model {
namespace {

using ::testing::ElementsAre;

TEST(Gpt2ByteTableTest, MatchesGpt2) {
  EXPECT_EQ(Gpt2ByteToCodePoint('!'), uint32_t{'!'});
  EXPECT_EQ(Gpt2ByteToCodePoint('~'), uint32_t{'~'});
  EXPECT_EQ(Gpt2ByteToCodePoint(0), 0x100u);     // Ā
  EXPECT_EQ(Gpt2ByteToCodePoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(Gpt2ByteToCodePoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(Gpt2ByteToCodePoint(0x7F), 0x121u);  // ġ
  EXPECT_EQ(Gpt2ByteToCodePoint(0xA0), 0x142u);  // ł
  EXPECT_EQ(Gpt2ByteToCodePoint(0xA1), 0xA1u);
  EXPECT_EQ(Gpt2ByteToCodePoint(0xAD), 0x143u);  // Ń
  EXPECT_EQ(Gpt2ByteToCodePoint(0xFF), 0xFFu);
  std::set<uint32_t> seen;
  for (int b = 0; b < 256; ++b) seen.insert(Gpt2ByteToCodePoint(static_cast<uint8_t>(b)));
  EXPECT_EQ(seen.size(), 256u);
}

TEST(Gpt2TokenizerTest, MergesByRank) {
  auto tok = MakeGpt2Tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("hello world", false), ElementsAre(262, 261, 'l', 'd'));
  EXPECT_THAT(tok->Encode(" hello", false), ElementsAre(' ', 262));
  EXPECT_THAT(tok->Encode("lll", false), ElementsAre(257, 'l'));
  EXPECT_THAT(tok->Encode("hell", false), ElementsAre(258));
  EXPECT_THAT(tok->Encode("hello\n\nworld", false),
              ElementsAre(262, '\n', '\n', 'w', 260, 'l', 'd'));
  // é is C3 A9, both spelled by themselves; "l l" still merges.
  EXPECT_THAT(tok->Encode("h\xC3\xA9llo", false), ElementsAre('h', 0xC3, 0xA9, 257, 'o'));
  // The merge "x y" makes no piece: back to one token per byte.
  EXPECT_THAT(tok->Encode("xy", false), ElementsAre('x', 'y'));
  EXPECT_TRUE(tok->Encode("", false).empty());
}

TEST(Gpt2TokenizerTest, BosAndControl) {
  TokenizerSpec spec = MakeGpt2Spec();
  spec.bos_id = kGpt2Eos;
  spec.add_bos = true;
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_THAT((*tok)->Encode("hell", true), ElementsAre(kGpt2Eos, 258));
  // Special-token text is not parsed: it is encoded as plain text.
  EXPECT_EQ((*tok)->Encode("<|endoftext|>", false).size(), 13u);
  EXPECT_EQ((*tok)->TokenBytes(kGpt2Eos), "");
  EXPECT_EQ((*tok)->TokenBytes(264), "<tag>");  // user-defined: plain text
  EXPECT_EQ((*tok)->TokenBytes(' '), " ");
  EXPECT_EQ((*tok)->TokenBytes(0), std::string(1, '\0'));
  EXPECT_EQ((*tok)->TokenBytes(261), " wor");
  EXPECT_EQ((*tok)->Decode({kGpt2Eos, 262, 261, 'l', 'd', kGpt2Eos}), "hello world");
  // No dummy prefix in gpt2: strip_leading_space changes nothing.
  EXPECT_EQ((*tok)->Decode({' ', 262}, true), " hello");
}

TEST(Gpt2TokenizerTest, RoundTrips) {
  auto tok = MakeGpt2Tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<std::string> texts = {
      "hello world, hello   world!\n",
      "I'm here, they'll see; it's 3.14 o'clock",
      "中文测试，繁體字。",
      "emoji 😀🎉👍🏽 and 👨‍👩‍👧",
      "\x01\x7f\t\r\n control bytes",
      "  lead and trail  ",
      "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
  };
  for (const std::string& text : texts) {
    EXPECT_EQ(tok->Decode(tok->Encode(text, false)), text) << text;
  }
  // Invalid UTF-8 is read as U+FFFD (EF BF BD), as llama.cpp reads it; an overlong NUL is
  // read as NUL. Decoding always gives valid UTF-8.
  EXPECT_THAT(tok->Encode("a\xFF", false), ElementsAre('a', 0xEF, 0xBF, 0xBD));
  EXPECT_THAT(tok->Encode("\xC0\x80", false), ElementsAre(0));
  EXPECT_EQ(tok->Decode({'a', 0xFF}), "a\xEF\xBF\xBD");
}

std::vector<std::string> Gpt2PreTokenize(std::string_view text) {
  return PreTokenize(PreTokenizer::kGpt2, text);
}

TEST(Gpt2PreTokenizerTest, SplitsLikeGpt2Pattern) {
  EXPECT_THAT(Gpt2PreTokenize("Hello world's  3.14!!\n\n  x"),
              ElementsAre("Hello", " world", "'s", " ", " 3", ".", "14", "!!", "\n\n ", " x"));
  EXPECT_THAT(Gpt2PreTokenize("I'm we're they've you'll he'd isn't"),
              ElementsAre("I", "'m", " we", "'re", " they", "'ve", " you", "'ll", " he", "'d",
                          " isn", "'t"));
  EXPECT_THAT(Gpt2PreTokenize("'S 'x"), ElementsAre("'", "S", " '", "x"));
  EXPECT_THAT(Gpt2PreTokenize("a\tb  "), ElementsAre("a", "\t", "b", "  "));
  EXPECT_THAT(Gpt2PreTokenize(" "), ElementsAre(" "));
  EXPECT_THAT(Gpt2PreTokenize("x\n y"), ElementsAre("x", "\n", " y"));
  EXPECT_THAT(Gpt2PreTokenize("a...b ?!c"), ElementsAre("a", "...", "b", " ?!", "c"));
  EXPECT_THAT(Gpt2PreTokenize("abc123def"), ElementsAre("abc", "123", "def"));
  // 你好，世界 — the fullwidth comma is punctuation.
  EXPECT_THAT(Gpt2PreTokenize("你好，世界"), ElementsAre("你好", "，", "世界"));
  EXPECT_THAT(Gpt2PreTokenize("😀😀 x é"), ElementsAre("😀😀", " x", " é"));
  // A non-breaking space is whitespace but not the optional ' ' prefix.
  EXPECT_THAT(Gpt2PreTokenize("a\xC2\xA0"
                              "b"),
              ElementsAre("a", "\xC2\xA0", "b"));
  // Invalid bytes are read as U+FFFD (a symbol), as llama.cpp reads them.
  EXPECT_THAT(Gpt2PreTokenize("a\xFF\xFE"
                              "b"),
              ElementsAre("a", "\xEF\xBF\xBD\xEF\xBF\xBD", "b"));
  EXPECT_TRUE(Gpt2PreTokenize("").empty());
}

TEST(UnicodeClassTest, CategoriesFromUtf8proc) {
  EXPECT_EQ(CodePointFlags('a'), kLetter);
  EXPECT_EQ(CodePointFlags('7'), kNumber);
  EXPECT_EQ(CodePointFlags('\v'), kControl | kWhitespace);
  EXPECT_EQ(CodePointFlags(' '), kSeparator | kWhitespace);
  EXPECT_EQ(CodePointFlags('_'), kPunctuation);
  EXPECT_EQ(CodePointFlags('$'), kSymbol);
  EXPECT_EQ(CodePointFlags(0x1C), kControl);                // not White_Space
  EXPECT_EQ(CodePointFlags(0x85), kControl | kWhitespace);  // next line
  EXPECT_EQ(CodePointFlags(0xE9), kLetter);                 // é
  EXPECT_EQ(CodePointFlags(0xD7), kSymbol);                 // ×
  EXPECT_EQ(CodePointFlags(0xB2), kNumber);                 // ²
  EXPECT_EQ(CodePointFlags(0xA0), kSeparator | kWhitespace);
  EXPECT_EQ(CodePointFlags(0x301), kMark);          // combining acute
  EXPECT_EQ(CodePointFlags(0x663), kNumber);        // Arabic-Indic three
  EXPECT_EQ(CodePointFlags(0x2014), kPunctuation);  // em dash
  EXPECT_EQ(CodePointFlags(0x200B), kControl);      // zero width space (Cf)
  EXPECT_EQ(CodePointFlags(0x3000), kSeparator | kWhitespace);
  EXPECT_EQ(CodePointFlags(0x3002), kPunctuation);  // 。
  EXPECT_EQ(CodePointFlags(0x4E2D), kLetter);       // 中
  EXPECT_EQ(CodePointFlags(0x1F600), kSymbol);      // 😀
  EXPECT_EQ(CodePointFlags(0xE000), kControl);      // private use
  EXPECT_EQ(CodePointFlags(0x0378), kUndefined);    // unassigned
  EXPECT_EQ(CodePointFlags(0x110000), kUndefined);
  EXPECT_EQ(CodePointToLower('S'), uint32_t{'s'});
  EXPECT_EQ(CodePointToLower(0x416), 0x436u);  // Ж -> ж
}

}  // namespace
}  // namespace pagoda::model
