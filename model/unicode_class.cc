#include "model/unicode_class.h"

#include <utf8proc.h>

namespace pagoda::model {
namespace {

constexpr uint32_t kReplacement = 0xFFFD;

uint16_t CategoryFlag(utf8proc_category_t category) {
  switch (category) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return kLetter;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
      return kMark;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return kNumber;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return kPunctuation;
    case UTF8PROC_CATEGORY_SM:
    case UTF8PROC_CATEGORY_SC:
    case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
      return kSymbol;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return kSeparator;
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
      return kControl;
    default:
      return kUndefined;
  }
}

// Unicode's White_Space property (a property, not a category, so listed here).
bool IsWhiteSpace(uint32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0) return true;
  if (cp < 0x1680) return false;
  return cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace

uint16_t CodePointFlags(uint32_t cp) {
  if (cp > 0x10FFFF) return kUndefined;
  uint16_t flags = CategoryFlag(utf8proc_category(static_cast<utf8proc_int32_t>(cp)));
  if (IsWhiteSpace(cp)) flags |= kWhitespace;
  return flags;
}

uint32_t CodePointToLower(uint32_t cp) {
  if (cp > 0x10FFFF) return cp;
  return static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}

std::vector<uint32_t> DecodeCodePoints(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const auto lead = static_cast<uint8_t>(text[pos]);
    // llama.cpp's reading: the lead byte alone gives the length; only the continuation bytes'
    // top bits are checked (overlong forms and surrogates pass).
    size_t len = 0;
    uint32_t cp = 0;
    if (lead < 0x80) {
      len = 1;
      cp = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      len = 2;
      cp = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      len = 3;
      cp = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      len = 4;
      cp = lead & 0x07;
    }
    bool ok = len > 0 && pos + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto b = static_cast<uint8_t>(text[pos + k]);
      ok = (b & 0xC0) == 0x80;
      cp = (cp << 6) | (b & 0x3F);
    }
    // Above U+10FFFF llama.cpp fails to re-encode (an exception); read it as U+FFFD too.
    if (!ok || cp > 0x10FFFF) {
      cps.push_back(kReplacement);
      pos += 1;
    } else {
      cps.push_back(cp);
      pos += len;
    }
  }
  return cps;
}

}  // namespace pagoda::model
