#include "grammar/string_format.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pagoda::grammar {
namespace {

// The ASCII characters a class or escape stands for, one bit per code (0..127).
struct AsciiSet {
  ByteSet bytes;
  void Add(int lo, int hi) { bytes.AddRange(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)); }
  AsciiSet Negated() const {  // within printable ASCII and the escapable controls
    AsciiSet out;
    for (int c : {'\t', '\n', '\r'}) {
      if (!bytes.Has(c)) out.Add(c, c);
    }
    for (int c = 0x20; c < 0x7F; ++c) {
      if (!bytes.Has(c)) out.Add(c, c);
    }
    return out;
  }
};

// Recursive descent over the pattern: alternation | sequence | quantified atom.
class PatternCompiler {
 public:
  PatternCompiler(absl::string_view p, GrammarBuilder* b, int32_t any_char)
      : p_(p), b_(b), any_char_(any_char) {}

  absl::StatusOr<int32_t> Compile() {
    bool anchored_start = false, anchored_end = false;
    if (!p_.empty() && p_.front() == '^') {
      anchored_start = true;
      p_.remove_prefix(1);
    }
    if (!p_.empty() && p_.back() == '$' && (p_.size() < 2 || p_[p_.size() - 2] != '\\')) {
      anchored_end = true;
      p_.remove_suffix(1);
    }
    auto body = Alternation();
    if (!error_.empty()) return absl::InvalidArgumentError(error_);
    if (i_ != p_.size())
      return absl::InvalidArgumentError(absl::StrCat("unbalanced ')' in pattern"));
    // JSON Schema patterns are unanchored: an open end takes any characters.
    const int32_t any = b_->Repeat("any", b_->Ref(any_char_), 0, -1);
    const int32_t rule = b_->NewRule("pattern");
    std::vector<Symbol> seq;
    if (!anchored_start) seq.push_back(b_->Ref(any));
    seq.push_back(b_->Ref(body));
    if (!anchored_end) seq.push_back(b_->Ref(any));
    b_->AddAlternative(rule, std::move(seq));
    return rule;
  }

 private:
  int32_t Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    const int32_t r = b_->NewRule("error");
    b_->AddAlternative(r, {});
    return r;
  }

  int32_t Alternation() {
    const int32_t rule = b_->NewRule("alt");
    for (;;) {
      b_->AddAlternative(rule, {b_->Ref(Sequence())});
      if (!error_.empty() || b_->over_limit()) return rule;
      if (i_ < p_.size() && p_[i_] == '|') {
        ++i_;
        continue;
      }
      return rule;
    }
  }

  int32_t Sequence() {
    std::vector<Symbol> seq;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')' && error_.empty() &&
           !b_->over_limit()) {
      seq.push_back(b_->Ref(Quantified()));
    }
    const int32_t rule = b_->NewRule("seq");
    b_->AddAlternative(rule, std::move(seq));
    return rule;
  }

  bool ReadInt(int* out) {
    size_t start = i_;
    long v = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9' && v < 100000)
      v = v * 10 + (p_[i_++] - '0');
    *out = static_cast<int>(v);
    return i_ > start;
  }

  int32_t Quantified() {
    const int32_t atom = Atom();
    if (i_ >= p_.size()) return atom;
    int min = 0, max = -1;
    const char c = p_[i_];
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
    } else if (c == '{') {
      ++i_;
      if (!ReadInt(&min)) return Fail("malformed {n,m} in pattern");
      max = min;
      if (i_ < p_.size() && p_[i_] == ',') {
        ++i_;
        if (!ReadInt(&max)) max = -1;
      }
      if (i_ >= p_.size() || p_[i_] != '}') return Fail("malformed {n,m} in pattern");
      ++i_;
      if (min > 256 || max > 256 || (max >= 0 && max < min)) {
        return Fail("a {n,m} count over 256 or reversed in pattern");
      }
    } else {
      return atom;
    }
    if (i_ < p_.size() && (p_[i_] == '?' || p_[i_] == '+')) {
      return Fail("lazy and possessive quantifiers are not supported in pattern");
    }
    return b_->Repeat("rep", b_->Ref(atom), min, max);
  }

  // A rule for one ASCII character set as JSON string content ('"', '\\' and controls as
  // their escapes).
  int32_t SetRule(const AsciiSet& set) {
    const int32_t rule = b_->NewRule("class");
    ByteSet plain;
    for (int c = 0x20; c < 0x80; ++c) {
      if (set.bytes.Has(c) && c != '"' && c != '\\') plain.Add(static_cast<uint8_t>(c));
    }
    if (!(plain == ByteSet())) b_->AddAlternative(rule, {b_->Bytes(plain)});
    const std::pair<int, char> escapes[] = {
        {'"', '"'}, {'\\', '\\'}, {'\n', 'n'}, {'\t', 't'}, {'\r', 'r'}};
    for (const auto& [c, e] : escapes) {
      if (set.bytes.Has(c)) b_->AddAlternative(rule, {b_->Byte('\\'), b_->Byte(e)});
    }
    return rule;
  }

  // The set of a class escape (\d \w \s and negations); false for another letter.
  static bool ClassEscape(char c, AsciiSet* out) {
    AsciiSet s;
    switch (c | 0x20) {
      case 'd':
        s.Add('0', '9');
        break;
      case 'w':
        s.Add('0', '9');
        s.Add('a', 'z');
        s.Add('A', 'Z');
        s.Add('_', '_');
        break;
      case 's':
        s.Add(' ', ' ');
        s.Add('\t', '\t');
        s.Add('\n', '\n');
        s.Add('\r', '\r');
        break;
      default:
        return false;
    }
    *out = (c >= 'A' && c <= 'Z') ? s.Negated() : s;
    return true;
  }

  // One character after a backslash, as a literal code; -1 when not a literal escape.
  static int LiteralEscape(char c) {
    switch (c) {
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      default:
        break;
    }
    if (std::string_view("\\.^$|?*+()[]{}/-\"").find(c) != std::string_view::npos) return c;
    return -1;
  }

  int32_t Class() {
    ++i_;  // '['
    bool negate = false;
    if (i_ < p_.size() && p_[i_] == '^') {
      negate = true;
      ++i_;
    }
    AsciiSet set;
    bool first = true;
    while (i_ < p_.size() && (p_[i_] != ']' || first)) {
      first = false;
      int lo;
      if (p_[i_] == '\\' && i_ + 1 < p_.size()) {
        AsciiSet cls;
        if (ClassEscape(p_[i_ + 1], &cls)) {
          for (int c = 0; c < 128; ++c) {
            if (cls.bytes.Has(c)) set.Add(c, c);
          }
          i_ += 2;
          continue;
        }
        lo = LiteralEscape(p_[i_ + 1]);
        if (lo < 0)
          return Fail(
              absl::StrCat("unsupported escape \\", std::string(1, p_[i_ + 1]), " in pattern"));
        i_ += 2;
      } else {
        lo = static_cast<uint8_t>(p_[i_++]);
      }
      int hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (p_[i_] == '\\' && i_ + 1 < p_.size()) {
          hi = LiteralEscape(p_[i_ + 1]);
          i_ += 2;
        } else {
          hi = static_cast<uint8_t>(p_[i_++]);
        }
      }
      if (lo >= 0x80 || hi >= 0x80 || hi < lo) {
        return Fail("a character class with non-ASCII or reversed ranges in pattern");
      }
      set.Add(lo, hi);
    }
    if (i_ >= p_.size()) return Fail("unterminated [ in pattern");
    ++i_;  // ']'
    return SetRule(negate ? set.Negated() : set);
  }

  int32_t Atom() {
    const char c = p_[i_];
    if (c == '(') {
      // Each group is a level of recursion here: the depth is bounded before it recurses.
      if (depth_ >= kMaxGroupDepth) {
        return Fail(absl::StrCat("groups nested deeper than ", kMaxGroupDepth, " in pattern"));
      }
      ++i_;
      if (p_.substr(i_, 2) == "?:") {
        i_ += 2;
      } else if (i_ < p_.size() && p_[i_] == '?') {
        return Fail("lookaround and named groups are not supported in pattern");
      }
      ++depth_;
      const int32_t inner = Alternation();
      --depth_;
      if (i_ >= p_.size() || p_[i_] != ')') return Fail("unbalanced '(' in pattern");
      ++i_;
      return inner;
    }
    if (c == '[') return Class();
    if (c == '.') {
      ++i_;
      return any_char_;  // any character (newline included: JSON strings escape it)
    }
    if (c == '\\') {
      if (i_ + 1 >= p_.size()) return Fail("a trailing backslash in pattern");
      const char e = p_[i_ + 1];
      i_ += 2;
      AsciiSet cls;
      if (ClassEscape(e, &cls)) return SetRule(cls);
      const int lit = LiteralEscape(e);
      if (lit < 0)
        return Fail(absl::StrCat("unsupported escape \\", std::string(1, e), " in pattern"));
      AsciiSet one;
      one.Add(lit, lit);
      return SetRule(one);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{' || c == '^' || c == '$') {
      return Fail(absl::StrCat("unexpected '", std::string(1, c), "' in pattern"));
    }
    const auto u = static_cast<uint8_t>(c);
    if (u < 0x20) return Fail("a control character in pattern");
    if (u < 0x80) {
      ++i_;
      AsciiSet one;
      one.Add(u, u);
      return SetRule(one);
    }
    // A UTF-8 character, copied as its bytes (the schema is valid UTF-8 JSON).
    size_t n = 1;
    while (i_ + n < p_.size() && (static_cast<uint8_t>(p_[i_ + n]) & 0xC0) == 0x80) ++n;
    const int32_t rule = b_->LiteralRule(p_.substr(i_, n));
    i_ += n;
    return rule;
  }

  static constexpr int kMaxGroupDepth = 64;

  absl::string_view p_;
  size_t i_ = 0;
  int depth_ = 0;  // groups open
  GrammarBuilder* b_;
  int32_t any_char_;
  std::string error_;
};

}  // namespace

absl::StatusOr<int32_t> CompilePattern(absl::string_view pattern, GrammarBuilder* b,
                                       int32_t any_char) {
  return PatternCompiler(pattern, b, any_char).Compile();
}

absl::StatusOr<int32_t> CompileFormat(absl::string_view format, GrammarBuilder* b,
                                      int32_t any_char) {
  static constexpr char kDate[] = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
  static constexpr char kTime[] =
      "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]"
      ")";
  std::string pattern;
  if (format == "date") {
    pattern = kDate;
  } else if (format == "time") {
    pattern = kTime;
  } else if (format == "date-time") {
    pattern = absl::StrCat(kDate, "T", kTime);
  } else if (format == "uuid") {
    pattern = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unsupported format '", format, "'"));
  }
  return CompilePattern(absl::StrCat("^", pattern, "$"), b, any_char);
}

}  // namespace pagoda::grammar
