#include "model/llama_tokenizer.h"

#include <optional>

#include "model/bpe.h"

namespace pagoda::model {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// The text SentencePiece segments: optional dummy prefix, then spaces as U+2581.
std::string Normalize(std::string_view text, bool add_space_prefix) {
  std::string out;
  out.reserve(text.size() + text.size() / 2 + 3);
  if (add_space_prefix) out += kSpaceMark;
  for (char c : text) {
    if (c == ' ') {
      out += kSpaceMark;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

bool ParseBytePiece(std::string_view piece, uint8_t* byte) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return false;
  int value = 0;
  for (size_t k = 3; k < 5; ++k) {
    const char c = piece[k];
    int digit = 0;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    value = value * 16 + digit;
  }
  *byte = static_cast<uint8_t>(value);
  return true;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LlamaTokenizer::Create(TokenizerSpec spec,
                                                                  std::vector<int32_t> eog_ids) {
  return std::unique_ptr<Tokenizer>(new LlamaTokenizer(std::move(spec), std::move(eog_ids)));
}

LlamaTokenizer::LlamaTokenizer(TokenizerSpec spec, std::vector<int32_t> eog_ids)
    : Tokenizer(std::move(spec), std::move(eog_ids)) {
  byte_to_id_.fill(-1);
  token_bytes_.resize(spec_.tokens.size());
  for (int32_t id = 0; id < vocab_size(); ++id) {
    const std::string& piece = spec_.tokens[id];
    const TokenType type = type_of(id);
    uint8_t byte = 0;
    if (type == TokenType::kByte && ParseBytePiece(piece, &byte)) {
      if (byte_to_id_[byte] < 0) byte_to_id_[byte] = id;
      token_bytes_[id] = std::string(1, static_cast<char>(byte));
      continue;
    }
    // Control, unknown and unused tokens stand for no text. A byte token with a malformed
    // piece is read as normal text.
    if (type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUnused) {
      continue;
    }
    piece_to_id_.emplace(piece, id);
    std::string& text = token_bytes_[id];
    for (size_t pos = 0; pos < piece.size();) {
      if (piece.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
        text.push_back(' ');
        pos += kSpaceMark.size();
      } else {
        text.push_back(piece[pos++]);
      }
    }
  }
}

void LlamaTokenizer::EncodeText(std::string_view text, bool starts_text,
                                std::vector<int32_t>* ids) const {
  if (text.empty()) return;  // no dummy prefix for an empty text (as llama.cpp)
  const std::string normalized = Normalize(text, spec_.add_space_prefix && starts_text);
  std::vector<bpe::Symbol> symbols = bpe::SplitChars(normalized);
  // Adjacent symbols are adjacent in the text, so their union is one view.
  auto priority = [this](std::string_view left, std::string_view right) -> std::optional<double> {
    const auto it = piece_to_id_.find(bpe::Key({left.data(), left.size() + right.size()}));
    if (it == piece_to_id_.end()) return std::nullopt;
    return spec_.scores[it->second];
  };
  bpe::Merge(normalized, &symbols, priority);
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    EmitPiece(std::string_view(normalized).substr(symbols[i].start, symbols[i].len), ids);
  }
}

void LlamaTokenizer::EmitPiece(std::string_view piece, std::vector<int32_t>* ids) const {
  const auto it = piece_to_id_.find(bpe::Key(piece));
  if (it != piece_to_id_.end()) {
    ids->push_back(it->second);
    return;
  }
  // Byte fallback. A piece with a byte that has no byte token becomes one unknown token
  // (or nothing when the vocabulary has none).
  for (char c : piece) {
    if (byte_to_id_[static_cast<uint8_t>(c)] < 0) {
      if (spec_.unk_id >= 0) ids->push_back(spec_.unk_id);
      return;
    }
  }
  for (char c : piece) ids->push_back(byte_to_id_[static_cast<uint8_t>(c)]);
}

std::string LlamaTokenizer::TokenBytes(int32_t id) const {
  if (!InRange(id)) return {};
  return token_bytes_[id];
}

}  // namespace pagoda::model
