// The pre-tokenizer patterns. The Gpt2 and Llama3 splitters reproduce llama.cpp's
// hand-written matchers (unicode.cpp) step for step, including where those differ from a
// regex engine; the Match* functions reproduce what std::regex finds for the other patterns
// on llama.cpp's "collapsed" text, where every non-ASCII code point stands for its class.
#include "model/pretokenizer_patterns.h"

#include <algorithm>
#include <iterator>

#include "model/unicode_class.h"

namespace pagoda::model::pretok {
namespace {

// A code point's view from the matchers: flags 0 outside [begin, end).
class Window {
 public:
  Window(const CpText& t, size_t begin, size_t end) : t_(t), begin_(begin), end_(end) {}
  bool In(size_t pos) const { return pos >= begin_ && pos < end_; }
  uint32_t Cp(size_t pos) const { return In(pos) ? t_.cps[pos] : kOutside; }
  uint16_t Flags(size_t pos) const { return In(pos) ? t_.flags[pos] : 0; }
  bool Is(size_t pos, uint16_t flag) const { return (Flags(pos) & flag) != 0; }
  // In range and neither whitespace, letter nor number: [^\s\p{L}\p{N}].
  bool IsOther(size_t pos) const {
    return In(pos) && (Flags(pos) & (kWhitespace | kLetter | kNumber)) == 0;
  }
  bool IsCrLf(size_t pos) const { return Cp(pos) == '\r' || Cp(pos) == '\n'; }

  static constexpr uint32_t kOutside = 0xFFFFFFFF;

 private:
  const CpText& t_;
  size_t begin_;
  size_t end_;
};

// Appends words for [begin, end) as the matchers cut them.
class Cutter {
 public:
  Cutter(size_t begin, std::vector<size_t>* lengths) : prev_(begin), lengths_(lengths) {}
  // Ends the current word at `end`; returns its length (0 adds nothing).
  size_t Cut(size_t end) {
    const size_t len = end - prev_;
    if (len > 0) lengths_->push_back(len);
    prev_ = end;
    return len;
  }

 private:
  size_t prev_;
  std::vector<size_t>* lengths_;
};

// Length of the contraction 's 't 'm 'd 're 've 'll at `pos` (0 when none); with
// `any_case` the letters are compared lowercased.
size_t Contraction(const Window& w, size_t pos, size_t end, bool any_case) {
  if (w.Cp(pos) != '\'' || pos + 1 >= end) return 0;
  auto letter = [&](size_t p) { return any_case ? CodePointToLower(w.Cp(p)) : w.Cp(p); };
  const uint32_t a = letter(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= end) return 0;
  const uint32_t b = letter(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// The whitespace alternatives both matchers end with; returns the new position.
// \s*[\r\n]+ (only with `newlines`), \s+(?!\S), \s+, else one code point.
size_t Whitespace(const Window& w, size_t pos, size_t end, bool newlines) {
  size_t n = 0;
  size_t after_last_newline = 0;
  while (w.Is(pos + n, kWhitespace)) {
    if (w.IsCrLf(pos + n)) after_last_newline = pos + n + 1;
    ++n;
  }
  if (newlines && after_last_newline > 0) return after_last_newline;
  if (n > 1 && pos + n < end) return pos + n - 1;
  if (n > 0) return pos + n;
  return pos + 1;
}

}  // namespace

void SplitGpt2(const CpText& t, size_t begin, size_t end, std::vector<size_t>* lengths) {
  const Window w(t, begin, end);
  Cutter cut(begin, lengths);
  for (size_t pos = begin; pos < end;) {
    const uint32_t cp = w.Cp(pos);
    if (const size_t len = Contraction(w, pos, end, /*any_case=*/false); len > 0) {
      pos += cut.Cut(pos + len);
      continue;
    }
    // ` ?` then a run of one class: letters, numbers, or [^\s\p{L}\p{N}].
    const size_t run = cp == ' ' ? pos + 1 : pos;
    // The class of the run's first code point decides which run it is.
    auto same_class = [&w, first = run](size_t p) {
      if (w.Is(first, kLetter)) return w.Is(p, kLetter);
      if (w.Is(first, kNumber)) return w.Is(p, kNumber);
      return w.IsOther(p);
    };
    if (w.Is(run, kLetter | kNumber) || w.IsOther(run)) {
      for (pos = run; same_class(pos);) ++pos;
      cut.Cut(pos);
      continue;
    }
    pos = Whitespace(w, pos, end, /*newlines=*/false);
    cut.Cut(pos);
  }
}

void SplitLlama3(const CpText& t, size_t begin, size_t end, size_t max_digits,
                 std::vector<size_t>* lengths) {
  const Window w(t, begin, end);
  Cutter cut(begin, lengths);
  for (size_t pos = begin; pos < end;) {
    const uint32_t cp = w.Cp(pos);
    if (const size_t len = Contraction(w, pos, end, /*any_case=*/true); len > 0) {
      pos += cut.Cut(pos + len);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!w.IsCrLf(pos) && !w.Is(pos, kNumber) && (w.Is(pos, kLetter) || w.Is(pos + 1, kLetter))) {
      ++pos;
      while (w.Is(pos, kLetter)) ++pos;
      cut.Cut(pos);
      continue;
    }
    // \p{N}{1,max_digits}
    if (w.Is(pos, kNumber)) {
      size_t group = pos;
      while (w.Is(pos, kNumber)) {
        if (++pos - group >= max_digits) {
          cut.Cut(pos);
          group = pos;
        }
      }
      cut.Cut(pos);
      continue;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    const size_t run = cp == ' ' ? pos + 1 : pos;
    if (w.IsOther(run)) {
      pos = run;
      while (w.IsOther(pos)) ++pos;
      while (w.IsCrLf(pos)) ++pos;
      cut.Cut(pos);
      continue;
    }
    pos = Whitespace(w, pos, end, /*newlines=*/true);
    cut.Cut(pos);
  }
}

namespace {

bool IsAsciiDigit(uint32_t cp) { return cp >= '0' && cp <= '9'; }

struct Range {
  uint32_t lo;
  uint32_t hi;  // inclusive
};

template <size_t N>
bool InRanges(const Range (&ranges)[N], uint32_t cp) {
  return std::any_of(std::begin(ranges), std::end(ranges),
                     [cp](const Range& r) { return cp >= r.lo && cp <= r.hi; });
}

// deepseek-llm's letter class, its punctuation class and its CJK class, as code point ranges.
constexpr Range kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
    {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
    {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},
    {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
    {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
    {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
    {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
constexpr Range kDeepseekPunctuation[] = {
    {0x21, 0x2F},     {0x3A, 0x7E},     {0xFF01, 0xFF0F},
    {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
};
constexpr Range kDeepseekCjk[] = {{0x4E00, 0x9FA5}, {0x800, 0x4E00}, {0xAC00, 0xD7FF}};

// The regex engines see non-ASCII whitespace as U+000B, so it is in no class but \s.
template <size_t N>
bool InClass(const Window& w, size_t pos, const Range (&ranges)[N]) {
  return w.In(pos) && !w.Is(pos, kWhitespace) && InRanges(ranges, w.Cp(pos));
}

// \s?[class]+
template <size_t N>
size_t MatchSpaceThenRun(const CpText& t, size_t pos, size_t end, const Range (&ranges)[N]) {
  const Window w(t, pos, end);
  size_t p = pos;
  if (w.Is(p, kWhitespace) && InClass(w, p + 1, ranges)) ++p;
  if (!InClass(w, p, ranges)) return pos;
  while (InClass(w, p, ranges)) ++p;
  return p;
}

}  // namespace

size_t MatchDefaultPunctuation(const CpText& t, size_t pos, size_t end) {
  const Window w(t, pos, end);
  auto in_class = [&w](size_t p) {
    if (!w.In(p)) return false;
    const uint32_t cp = w.Cp(p);
    if (cp < 0x80) {
      return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) ||
             (cp >= 0x5B && cp <= 0x5F) || (cp >= 0x7B && cp <= 0x7E);
    }
    return w.Flags(p) == kPunctuation;  // whitespace would carry kWhitespace too
  };
  size_t p = pos;
  while (in_class(p)) ++p;
  return p;
}

size_t MatchNumberRun(const CpText& t, size_t pos, size_t end) {
  const Window w(t, pos, end);
  size_t p = pos;
  while (w.Is(p, kNumber)) ++p;
  return p;
}

size_t MatchNumber(const CpText& t, size_t pos, size_t end) {
  return Window(t, pos, end).Is(pos, kNumber) ? pos + 1 : pos;
}

size_t MatchThreeDigits(const CpText& t, size_t pos, size_t end) {
  const Window w(t, pos, end);
  for (size_t k = 0; k < 3; ++k) {
    if (!w.In(pos + k) || !IsAsciiDigit(w.Cp(pos + k))) return pos;
  }
  return pos + 3;
}

size_t MatchNewline(const CpText& t, size_t pos, size_t end) {
  return Window(t, pos, end).IsCrLf(pos) ? pos + 1 : pos;
}

size_t MatchDeepseekLetters(const CpText& t, size_t pos, size_t end) {
  return MatchSpaceThenRun(t, pos, end, kDeepseekLetters);
}

size_t MatchDeepseekPunctuation(const CpText& t, size_t pos, size_t end) {
  return MatchSpaceThenRun(t, pos, end, kDeepseekPunctuation);
}

size_t MatchTrailingSpace(const CpText& t, size_t pos, size_t end) {
  const Window w(t, pos, end);
  size_t p = pos;
  while (w.Is(p, kWhitespace)) ++p;
  return p > pos && p == end ? p : pos;
}

size_t MatchDeepseekCjk(const CpText& t, size_t pos, size_t end) {
  const Window w(t, pos, end);
  size_t p = pos;
  while (InClass(w, p, kDeepseekCjk)) ++p;
  return p;
}

namespace {

// Tekken's letter classes on the collapsed text: "upper" is a letter other than a-z, "lower"
// a letter other than A-Z, so a non-ASCII letter is both.
bool IsUpper(const Window& w, size_t p) {
  return w.Is(p, kLetter) && !(w.Cp(p) >= 'a' && w.Cp(p) <= 'z');
}
bool IsLower(const Window& w, size_t p) {
  return w.Is(p, kLetter) && !(w.Cp(p) >= 'A' && w.Cp(p) <= 'Z');
}
size_t LowerRunEnd(const Window& w, size_t p) {
  while (IsLower(w, p)) ++p;
  return p;
}

// [^\r\n\p{L}\p{N}]? then upper* lower+ (first alternative) or upper+ lower* (second), with
// a backtracking engine's choice: the optional prefix taken when that succeeds, upper*
// giving back code points until lower+ can start.
size_t MatchTekkenLetters(const Window& w, size_t pos) {
  const bool prefix = w.In(pos) && !w.IsCrLf(pos) && !w.Is(pos, kLetter | kNumber);
  const size_t starts[2] = {prefix ? pos + 1 : pos, pos};
  for (size_t s : starts) {
    size_t upper_end = s;
    while (IsUpper(w, upper_end)) ++upper_end;
    if (IsLower(w, upper_end)) return LowerRunEnd(w, upper_end);
    for (size_t k = upper_end; k > s; --k) {
      if (IsLower(w, k - 1)) return LowerRunEnd(w, k - 1);
    }
  }
  for (size_t s : starts) {
    size_t upper_end = s;
    while (IsUpper(w, upper_end)) ++upper_end;
    if (upper_end > s) return LowerRunEnd(w, upper_end);
  }
  return pos;
}

}  // namespace

size_t MatchTekken(const CpText& t, size_t pos, size_t end) {
  const Window w(t, pos, end);
  if (const size_t e = MatchTekkenLetters(w, pos); e > pos) return e;
  if (w.Is(pos, kNumber)) return pos + 1;  // \p{N}
  // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
  const size_t run = w.Cp(pos) == ' ' && w.IsOther(pos + 1) ? pos + 1 : pos;
  if (w.IsOther(run)) {
    size_t p = run;
    while (w.IsOther(p)) ++p;
    while (w.IsCrLf(p) || w.Cp(p) == '/') ++p;
    return p;
  }
  if (!w.Is(pos, kWhitespace)) return pos;
  return Whitespace(w, pos, end, /*newlines=*/true);
}

}  // namespace pagoda::model::pretok
