#include "model/utf8.h"

namespace pagoda::model {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the character a lead byte starts and the allowed range of its second byte
// (the range excludes overlong forms, surrogates and code points above U+10FFFF); 0 when
// the byte cannot start a character.
struct LeadInfo {
  int len;
  uint8_t lo;
  uint8_t hi;
};

LeadInfo InfoForLead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

Utf8Status CheckUtf8Char(std::string_view text, size_t* len) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const LeadInfo info = InfoForLead(p[0]);
  if (info.len == 0) return Utf8Status::kInvalid;
  for (int k = 1; k < info.len; ++k) {
    if (static_cast<size_t>(k) >= text.size()) return Utf8Status::kIncomplete;
    const uint8_t lo = k == 1 ? info.lo : 0x80;
    const uint8_t hi = k == 1 ? info.hi : 0xBF;
    if (p[k] < lo || p[k] > hi) return Utf8Status::kInvalid;
  }
  *len = static_cast<size_t>(info.len);
  return Utf8Status::kComplete;
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0, len = 0; i < text.size(); i += len) {
    if (CheckUtf8Char(text.substr(i), &len) != Utf8Status::kComplete) return false;
  }
  return true;
}

bool DecodeUtf8Char(std::string_view text, size_t pos, uint32_t* cp, size_t* len) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  size_t n = 0;
  if (CheckUtf8Char(text.substr(pos), &n) != Utf8Status::kComplete) {
    *cp = p[0];
    *len = 1;
    return false;
  }
  uint32_t value = 0;
  switch (n) {
    case 1:
      value = p[0];
      break;
    case 2:
      value = (p[0] & 0x1Fu) << 6 | (p[1] & 0x3Fu);
      break;
    case 3:
      value = (p[0] & 0x0Fu) << 12 | (p[1] & 0x3Fu) << 6 | (p[2] & 0x3Fu);
      break;
    default:
      value = (p[0] & 0x07u) << 18 | (p[1] & 0x3Fu) << 12 | (p[2] & 0x3Fu) << 6 | (p[3] & 0x3Fu);
      break;
  }
  *cp = value;
  *len = n;
  return true;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Every decision at position i depends only on the bytes i..i+3, so deferring exactly the
// undecidable case (a proper prefix at the end of the data) keeps piecewise and whole-text
// results equal. Invalid data costs one U+FFFD per byte, which keeps that property simple.
size_t AppendSanitizedUtf8(std::string_view text, bool at_end, std::string* out) {
  size_t i = 0;
  while (i < text.size()) {
    size_t len = 0;
    const Utf8Status status = CheckUtf8Char(text.substr(i), &len);
    if (status == Utf8Status::kComplete) {
      out->append(text.substr(i, len));
      i += len;
    } else if (status == Utf8Status::kIncomplete && !at_end) {
      break;
    } else {
      out->append(kReplacement);
      ++i;
    }
  }
  return i;
}

}  // namespace pagoda::model
