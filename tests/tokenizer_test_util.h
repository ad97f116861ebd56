// Small hand-built vocabularies for the tokenizer tests, and a UTF-8 validity check that
// does not share code with model/utf8.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "model/tokenizer.h"

namespace pagoda::model {

// Llama specs: <unk> (0), <s> (1), </s> (2), <0x00>..<0xFF> (3..258), then the given pieces.
inline constexpr int32_t kLlamaFirstPiece = 259;

inline TokenizerSpec MakeLlamaSpec(const std::vector<std::pair<std::string, float>>& pieces,
                                   bool add_space_prefix) {
  TokenizerSpec spec;
  spec.model = "llama";
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.token_types = {2, 3, 3};
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    spec.token_types.push_back(6);
  }
  spec.scores.assign(spec.tokens.size(), 0.0f);
  for (const auto& [piece, score] : pieces) {
    spec.tokens.push_back(piece);
    spec.scores.push_back(score);
    spec.token_types.push_back(1);
  }
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.add_space_prefix = add_space_prefix;
  return spec;
}

inline std::unique_ptr<Tokenizer> MakeLlamaTokenizer(
    const std::vector<std::pair<std::string, float>>& pieces, bool add_space_prefix) {
  auto tok = Tokenizer::Create(MakeLlamaSpec(pieces, add_space_prefix));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

// GPT-2's byte spelling, derived here independently of the tokenizer: printable Latin-1
// bytes spell themselves, the rest take U+0100 onwards in byte order.
inline std::string SpellByte(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  int cp = b;
  if (!printable) {
    cp = 0x100;
    for (int k = 0; k < b; ++k) {
      if (!((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE)) ++cp;
    }
  }
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

// Gpt2 spec: byte b is token b (its spelling), then he (256), ll (257), hell (258), Ġw (259),
// or (260), Ġwor (261), hello (262), <|endoftext|> (263, control, eos), <tag> (264,
// user-defined). The merge "x y" has no token "xy".
inline constexpr int32_t kGpt2Eos = 263;

inline TokenizerSpec MakeGpt2Spec() {
  TokenizerSpec spec;
  spec.model = "gpt2";
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(SpellByte(b));
  for (const char* piece :
       {"he", "ll", "hell", "\xC4\xA0w", "or", "\xC4\xA0wor", "hello", "<|endoftext|>", "<tag>"}) {
    spec.tokens.push_back(piece);
  }
  spec.token_types.assign(spec.tokens.size(), 1);
  spec.token_types[kGpt2Eos] = 3;
  spec.token_types[264] = 4;
  spec.merges = {"h e", "l l", "he ll", "\xC4\xA0 w", "o r", "\xC4\xA0w or", "hell o", "x y"};
  spec.eos_id = kGpt2Eos;
  spec.add_bos = false;
  return spec;
}

inline std::unique_ptr<Tokenizer> MakeGpt2Tokenizer() {
  auto tok = Tokenizer::Create(MakeGpt2Spec());
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

// RFC 3629 validity by the well-formed byte sequence table (Unicode Table 3-7).
inline bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  auto in = [&](size_t k, int lo, int hi) {
    return k < s.size() && static_cast<uint8_t>(s[k]) >= lo && static_cast<uint8_t>(s[k]) <= hi;
  };
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b <= 0x7F) {
      i += 1;
    } else if (b >= 0xC2 && b <= 0xDF && in(i + 1, 0x80, 0xBF)) {
      i += 2;
    } else if ((b == 0xE0 && in(i + 1, 0xA0, 0xBF)) ||
               (((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) && in(i + 1, 0x80, 0xBF)) ||
               (b == 0xED && in(i + 1, 0x80, 0x9F))) {
      if (!in(i + 2, 0x80, 0xBF)) return false;
      i += 3;
    } else if ((b == 0xF0 && in(i + 1, 0x90, 0xBF)) ||
               (b >= 0xF1 && b <= 0xF3 && in(i + 1, 0x80, 0xBF)) ||
               (b == 0xF4 && in(i + 1, 0x80, 0x8F))) {
      if (!in(i + 2, 0x80, 0xBF) || !in(i + 3, 0x80, 0xBF)) return false;
      i += 4;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace pagoda::model
