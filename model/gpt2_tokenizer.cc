#include "model/gpt2_tokenizer.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/bpe.h"
#include "model/utf8.h"

namespace pagoda::model {
namespace {

constexpr bool SpellsItself(int b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

constexpr std::array<uint32_t, 256> MakeByteTable() {
  std::array<uint32_t, 256> table{};
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) table[b] = SpellsItself(b) ? b : next++;
  return table;
}

constexpr std::array<uint32_t, 256> kByteToCodePoint = MakeByteTable();
// 68 bytes are remapped, so spellings stay below kCodePointLimit.
constexpr uint32_t kCodePointLimit = 256 + 68;
static_assert(kByteToCodePoint[0] == 256 && kByteToCodePoint[' '] == 0x120 &&
              kByteToCodePoint[173] == kCodePointLimit - 1 && kByteToCodePoint['A'] == 'A');

// Inverse of kByteToCodePoint: the byte a code point below kCodePointLimit spells, or -1.
constexpr std::array<int16_t, kCodePointLimit> MakeInverseTable() {
  std::array<int16_t, kCodePointLimit> table{};
  for (auto& entry : table) entry = -1;
  for (int b = 0; b < 256; ++b) table[kByteToCodePoint[b]] = static_cast<int16_t>(b);
  return table;
}

constexpr std::array<int16_t, kCodePointLimit> kCodePointToByte = MakeInverseTable();

// The bytes a vocabulary piece spells: each table character becomes its byte; a character
// outside the table (not expected in a byte-level vocabulary) is kept as it is.
std::string UnspellPiece(std::string_view piece) {
  std::string bytes;
  for (size_t pos = 0; pos < piece.size();) {
    uint32_t cp = 0;
    size_t len = 0;
    if (DecodeUtf8Char(piece, pos, &cp, &len) && cp < kCodePointLimit &&
        kCodePointToByte[cp] >= 0) {
      bytes.push_back(static_cast<char>(kCodePointToByte[cp]));
    } else {
      bytes.append(piece.substr(pos, len));
    }
    pos += len;
  }
  return bytes;
}

}  // namespace

uint32_t Gpt2ByteToCodePoint(uint8_t b) { return kByteToCodePoint[b]; }

absl::StatusOr<std::unique_ptr<Tokenizer>> Gpt2Tokenizer::Create(TokenizerSpec spec,
                                                                 std::vector<int32_t> eog_ids) {
  absl::StatusOr<PreTokenizerConfig> pre = LookupPreTokenizer(spec.pre);
  if (!pre.ok()) return pre.status();
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const std::string& merge = spec.merges[rank];
    // The separator is the first space after the first character, as merges are written.
    const size_t space = merge.find(' ', 1);
    if (merge.empty() || space == std::string::npos || space + 1 >= merge.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer: merge ", rank, " (\"", merge, "\") is not \"left right\""));
    }
  }
  return std::unique_ptr<Tokenizer>(new Gpt2Tokenizer(std::move(spec), std::move(eog_ids), *pre));
}

Gpt2Tokenizer::Gpt2Tokenizer(TokenizerSpec spec, std::vector<int32_t> eog_ids,
                             PreTokenizerConfig pre)
    : Tokenizer(std::move(spec), std::move(eog_ids)), pre_(pre) {
  for (int b = 0; b < 256; ++b) AppendUtf8(kByteToCodePoint[b], &byte_text_[b]);
  merge_rank_.reserve(spec_.merges.size());
  for (size_t rank = 0; rank < spec_.merges.size(); ++rank) {
    merge_rank_.emplace(spec_.merges[rank], static_cast<int32_t>(rank));  // first one wins
  }
  token_bytes_.resize(spec_.tokens.size());
  text_to_id_.reserve(spec_.tokens.size());
  for (int32_t id = 0; id < vocab_size(); ++id) {
    const std::string& piece = spec_.tokens[id];
    text_to_id_[piece] = id;
    switch (type_of(id)) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUnused:
        break;  // no text
      case TokenType::kUserDefined:
        // Added tokens are stored as plain text, not spelled through the byte table.
        token_bytes_[id] = piece;
        break;
      default:
        token_bytes_[id] = UnspellPiece(piece);
        break;
    }
  }
}

void Gpt2Tokenizer::EncodeText(std::string_view text, bool /*starts_text*/,
                               std::vector<int32_t>* ids) const {
  for (const std::string& word : PreTokenize(pre_.type, text)) EncodeWord(word, ids);
}

void Gpt2Tokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  std::string spelled;
  spelled.reserve(word.size() * 2);
  for (char c : word) spelled += byte_text_[static_cast<uint8_t>(c)];
  if (pre_.ignore_merges) {
    if (const auto it = text_to_id_.find(spelled); it != text_to_id_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  std::vector<bpe::Symbol> symbols = bpe::SplitChars(spelled);
  if (symbols.empty()) return;
  std::string key;
  auto priority = [this, &key](std::string_view left,
                               std::string_view right) -> std::optional<double> {
    key.assign(left);
    key.push_back(' ');
    key.append(right);
    const auto it = merge_rank_.find(key);
    if (it == merge_rank_.end()) return std::nullopt;
    return -static_cast<double>(it->second);  // lowest rank first
  };
  bpe::Merge(spelled, &symbols, priority);
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    EmitSymbol(std::string_view(spelled).substr(symbols[i].start, symbols[i].len), ids);
  }
}

void Gpt2Tokenizer::EmitSymbol(std::string_view symbol, std::vector<int32_t>* ids) const {
  if (const auto it = text_to_id_.find(bpe::Key(symbol)); it != text_to_id_.end()) {
    ids->push_back(it->second);
    return;
  }
  // A merge whose result is no piece: llama.cpp looks up each byte of the spelling alone, so
  // only one-byte spellings (printable ASCII) can be found; the rest is dropped.
  for (size_t pos = 0; pos < symbol.size(); ++pos) {
    const auto it = text_to_id_.find(bpe::Key(symbol.substr(pos, 1)));
    if (it != text_to_id_.end()) ids->push_back(it->second);
  }
}

std::string Gpt2Tokenizer::TokenBytes(int32_t id) const {
  if (!InRange(id)) return {};
  return token_bytes_[id];
}

}  // namespace pagoda::model
