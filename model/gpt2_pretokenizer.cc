#include "model/gpt2_pretokenizer.h"

#include <algorithm>

#include "model/utf8.h"

namespace pagoda::model {
namespace {

struct Range {
  uint32_t lo;
  uint32_t hi;  // inclusive
};

// Unicode White_Space above ASCII.
constexpr Range kSpaceRanges[] = {
    {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};

// Common \p{N} ranges above ASCII: Latin-1 super/fractions, the decimal digits of the major
// scripts, number forms, circled and fullwidth digits, CJK numerals.
constexpr Range kNumberRanges[] = {
    {0xB2, 0xB3},       {0xB9, 0xB9},       {0xBC, 0xBE},     {0x660, 0x669},   {0x6F0, 0x6F9},
    {0x7C0, 0x7C9},     {0x966, 0x96F},     {0x9E6, 0x9EF},   {0xA66, 0xA6F},   {0xAE6, 0xAEF},
    {0xB66, 0xB6F},     {0xBE6, 0xBF2},     {0xC66, 0xC6F},   {0xCE6, 0xCEF},   {0xD66, 0xD78},
    {0xE50, 0xE59},     {0xED0, 0xED9},     {0xF20, 0xF33},   {0x1040, 0x1049}, {0x17E0, 0x17E9},
    {0x1810, 0x1819},   {0x2070, 0x2070},   {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2150, 0x2182},
    {0x2185, 0x2189},   {0x2460, 0x249B},   {0x24EA, 0x24FF}, {0x2776, 0x2793}, {0x3007, 0x3007},
    {0x3021, 0x3029},   {0x3038, 0x303A},   {0x3192, 0x3195}, {0x3220, 0x3229}, {0x3248, 0x324F},
    {0x3251, 0x325F},   {0x3280, 0x3289},   {0x32B1, 0x32BF}, {0xFF10, 0xFF19}, {0x1D7CE, 0x1D7FF},
    {0x1F100, 0x1F10C}, {0x1FBF0, 0x1FBF9},
};

// Common ranges above ASCII that are neither letters, numbers nor spaces: controls,
// punctuation, symbols, combining marks, format characters, private use; past the BMP,
// musical symbols, cards, enclosed alphanumerics, emoji, tags.
constexpr Range kOtherRanges[] = {
    {0x80, 0x84},        {0x86, 0x9F},       {0xA1, 0xA9},       {0xAB, 0xB1},
    {0xB4, 0xB4},        {0xB6, 0xB8},       {0xBB, 0xBB},       {0xBF, 0xBF},
    {0xD7, 0xD7},        {0xF7, 0xF7},       {0x2C2, 0x2C5},     {0x2D2, 0x2DF},
    {0x2E5, 0x2EB},      {0x2ED, 0x2ED},     {0x2EF, 0x36F},     {0x37E, 0x37E},
    {0x387, 0x387},      {0x483, 0x489},     {0x55A, 0x55F},     {0x589, 0x58A},
    {0x591, 0x5C7},      {0x5F3, 0x5F4},     {0x600, 0x61F},     {0x64B, 0x65F},
    {0x66A, 0x66D},      {0x670, 0x670},     {0x6D4, 0x6D4},     {0x964, 0x965},
    {0x1AB0, 0x1AFF},    {0x1DC0, 0x1DFF},   {0x200B, 0x2027},   {0x202A, 0x202E},
    {0x2030, 0x205E},    {0x2060, 0x206F},   {0x207A, 0x207E},   {0x208A, 0x208E},
    {0x20A0, 0x20F0},    {0x2100, 0x2101},   {0x2103, 0x2106},   {0x2108, 0x2109},
    {0x2114, 0x2114},    {0x2116, 0x2118},   {0x211E, 0x2123},   {0x2125, 0x2125},
    {0x2127, 0x2127},    {0x2129, 0x2129},   {0x212E, 0x212E},   {0x213A, 0x213B},
    {0x2140, 0x2144},    {0x214A, 0x214D},   {0x214F, 0x214F},   {0x2190, 0x245F},
    {0x249C, 0x24E9},    {0x2500, 0x2775},   {0x2794, 0x2BFF},   {0x2E00, 0x2E2E},
    {0x2E30, 0x2FFF},    {0x3001, 0x3004},   {0x3008, 0x3020},   {0x302A, 0x3030},
    {0x3036, 0x3037},    {0x303D, 0x303F},   {0x3099, 0x309C},   {0x30A0, 0x30A0},
    {0x30FB, 0x30FB},    {0x31C0, 0x31E3},   {0x3200, 0x321E},   {0x322A, 0x3247},
    {0x3260, 0x327F},    {0x32C0, 0x33FF},   {0x4DC0, 0x4DFF},   {0xE000, 0xF8FF},
    {0xFE00, 0xFE6B},    {0xFEFF, 0xFEFF},   {0xFF01, 0xFF0F},   {0xFF1A, 0xFF20},
    {0xFF3B, 0xFF40},    {0xFF5B, 0xFF65},   {0x1D000, 0x1D24F}, {0x1D300, 0x1D35F},
    {0x1F000, 0x1F0FF},  {0x1F10D, 0x1FAFF}, {0x1FB00, 0x1FBEF}, {0xE0000, 0xE0FFF},
    {0xF0000, 0x10FFFF},
};

template <size_t N>
constexpr bool RangesSorted(const Range (&ranges)[N]) {
  for (size_t k = 0; k < N; ++k) {
    if (ranges[k].lo > ranges[k].hi) return false;
    if (k > 0 && ranges[k - 1].hi >= ranges[k].lo) return false;
  }
  return true;
}
static_assert(RangesSorted(kSpaceRanges) && RangesSorted(kNumberRanges) &&
              RangesSorted(kOtherRanges));

template <size_t N>
bool InRanges(const Range (&ranges)[N], uint32_t cp) {
  // First range ending at or after cp.
  const Range* it = std::lower_bound(ranges, ranges + N, cp,
                                     [](const Range& r, uint32_t value) { return r.hi < value; });
  return it != ranges + N && it->lo <= cp;
}

struct Char {
  size_t pos;
  size_t len;
  uint32_t cp;
  CharClass cls;
};

std::vector<Char> DecodeChars(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp = 0;
    size_t len = 0;
    const bool valid = DecodeUtf8Char(text, pos, &cp, &len);
    chars.push_back({pos, len, cp, valid ? ClassifyCodePoint(cp) : CharClass::kOther});
    pos += len;
  }
  return chars;
}

bool IsAsciiLetter(uint32_t cp) { return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'); }

// End (exclusive char index) of a contraction 's 't 're 've 'm 'll 'd at `i`, or 0.
size_t MatchContraction(const std::vector<Char>& chars, size_t i) {
  if (chars[i].cp != '\'' || i + 1 >= chars.size()) return 0;
  const uint32_t a = chars[i + 1].cp;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 >= chars.size()) return 0;
  const uint32_t b = chars[i + 2].cp;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return 0;
}

// End (exclusive char index) of the pre-token starting at char `i`, trying the pattern's
// alternatives in order.
size_t MatchAt(const std::vector<Char>& chars, size_t i) {
  const size_t n = chars.size();
  if (const size_t end = MatchContraction(chars, i); end != 0) return end;
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020 then a run of one class.
  size_t start = i;
  if (chars[i].cp == ' ' && i + 1 < n && chars[i + 1].cls != CharClass::kSpace) start = i + 1;
  const CharClass cls = chars[start].cls;
  size_t end = start;
  if (cls != CharClass::kSpace) {
    while (end < n && chars[end].cls == cls) ++end;
    return end;
  }
  while (end < n && chars[end].cls == CharClass::kSpace) ++end;
  // `\s+(?!\S)`: a run reaching the end, else the run less its last char (which then
  // prefixes the next word); `\s+` takes a single whitespace char before a non-space.
  if (end == n || end - i == 1) return end;
  return end - 1;
}

}  // namespace

CharClass ClassifyCodePoint(uint32_t cp) {
  if (cp < 0x80) {
    if (IsAsciiLetter(cp)) return CharClass::kLetter;
    if (cp >= '0' && cp <= '9') return CharClass::kNumber;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::kSpace;
    return CharClass::kOther;
  }
  if (InRanges(kSpaceRanges, cp)) return CharClass::kSpace;
  if (InRanges(kNumberRanges, cp)) return CharClass::kNumber;
  if (InRanges(kOtherRanges, cp)) return CharClass::kOther;
  return CharClass::kLetter;
}

std::vector<std::string_view> Gpt2PreTokenize(std::string_view text) {
  const std::vector<Char> chars = DecodeChars(text);
  std::vector<std::string_view> pieces;
  for (size_t i = 0; i < chars.size();) {
    const size_t end = MatchAt(chars, i);
    const size_t stop = end < chars.size() ? chars[end].pos : text.size();
    pieces.push_back(text.substr(chars[i].pos, stop - chars[i].pos));
    i = end;
  }
  return pieces;
}

}  // namespace pagoda::model
