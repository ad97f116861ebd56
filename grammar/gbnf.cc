#include "grammar/gbnf.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "grammar/utf8_ranges.h"

namespace pagoda::grammar {
namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '-'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `c` for messages: itself when printable ASCII, else its byte value.
std::string CharText(char c) {
  if (absl::ascii_isgraph(c)) return std::string(1, c);
  return absl::StrFormat("0x%02X", static_cast<uint8_t>(c));
}

class GbnfCompiler {
 public:
  GbnfCompiler(absl::string_view text, const GbnfLimits& limits)
      : t_(text), limits_(limits), b_(limits.max_elements) {}

  absl::StatusOr<std::shared_ptr<const Grammar>> Compile();

 private:
  using Alternatives = std::vector<std::vector<Symbol>>;
  struct NamedRule {
    int32_t id = -1;
    size_t defined_at = kNone;  // where its name starts in its definition
    size_t first_use = kNone;   // its first reference
  };

  std::string Where(size_t pos) const;
  absl::Status Error(size_t pos, absl::string_view cause) const;
  std::string Unexpected() const;
  bool More() const { return i_ < t_.size(); }
  char Peek() const { return t_[i_]; }
  // Skips spaces, tabs, carriage returns, comments and, when `newlines`, line ends.
  void SkipSpace(bool newlines);
  // At a line end outside parentheses: true (and at the '|') when the next non-blank,
  // non-comment character is a '|' continuing the rule.
  bool ContinuationFollows();

  absl::Status Rule();
  absl::Status Alternates(bool nested, int depth, Alternatives* alts);
  absl::Status Sequence(bool nested, int depth, std::vector<Symbol>* seq);
  // One element without its repetition suffixes, appended to `piece`.
  absl::Status Primary(int depth, std::vector<Symbol>* piece);
  absl::Status Literal(std::vector<Symbol>* piece);
  absl::Status Class(std::vector<Symbol>* piece);
  // One character of a literal or class: an escape or a UTF-8 encoded code point.
  absl::Status CodePoint(uint32_t* cp);
  absl::Status Escape(uint32_t* cp);
  // Applies the suffix at i_ (* + ? {..}) to `piece`.
  absl::Status Repetition(std::vector<Symbol>* piece);
  // A decimal count in braces opened at `open`: *present false when there are no digits.
  absl::Status Count(size_t open, int* out, bool* present);

  NamedRule& Named(absl::string_view name);
  // Helper rules are named after the rule being defined, so errors can name it.
  std::string HelperName(absl::string_view what) const { return absl::StrCat(current_, "/", what); }
  Symbol SetSymbol(const std::vector<CodePointRange>& normalized, absl::string_view name);
  absl::Status CheckSize(size_t pos) const;
  absl::Status BuildError(const absl::Status& status) const;

  absl::string_view t_;
  GbnfLimits limits_;
  size_t i_ = 0;
  GrammarBuilder b_;
  std::map<std::string, NamedRule, std::less<>> rules_;
  std::string current_;
  std::map<std::vector<CodePointRange>, Symbol> sets_;
};

std::string GbnfCompiler::Where(size_t pos) const {
  pos = std::min(pos, t_.size());
  int line = 1;
  size_t line_start = 0;
  for (size_t k = 0; k < pos; ++k) {
    if (t_[k] == '\n') {
      ++line;
      line_start = k + 1;
    }
  }
  return absl::StrCat(line, ":", pos - line_start + 1);
}

absl::Status GbnfCompiler::Error(size_t pos, absl::string_view cause) const {
  return absl::InvalidArgumentError(absl::StrCat("gbnf: ", Where(pos), ": ", cause));
}

std::string GbnfCompiler::Unexpected() const {
  if (!More()) return "unexpected end of text";
  return absl::StrCat("unexpected '", CharText(Peek()), "'");
}

void GbnfCompiler::SkipSpace(bool newlines) {
  while (More()) {
    const char c = Peek();
    if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
      ++i_;
    } else if (c == '#') {
      while (More() && Peek() != '\n') ++i_;
    } else {
      return;
    }
  }
}

bool GbnfCompiler::ContinuationFollows() {
  const size_t saved = i_;
  SkipSpace(true);
  if (More() && Peek() == '|') return true;
  i_ = saved;
  return false;
}

absl::StatusOr<std::shared_ptr<const Grammar>> GbnfCompiler::Compile() {
  if (t_.size() > limits_.max_text_bytes) {
    return Error(0, absl::StrCat("grammar text of ", t_.size(), " bytes is over the limit of ",
                                 limits_.max_text_bytes));
  }
  for (;;) {
    SkipSpace(true);
    if (!More()) break;
    RETURN_IF_ERROR(Rule());
  }
  const std::pair<const std::string, NamedRule>* undefined = nullptr;
  for (const auto& entry : rules_) {
    if (entry.second.defined_at != kNone) continue;
    if (undefined == nullptr || entry.second.first_use < undefined->second.first_use) {
      undefined = &entry;
    }
  }
  if (undefined != nullptr) {
    return Error(undefined->second.first_use,
                 absl::StrCat("undefined rule '", undefined->first, "'"));
  }
  const auto root = rules_.find("root");
  if (root == rules_.end()) return Error(0, "missing rule 'root'");
  const int32_t root_id = root->second.id;
  absl::StatusOr<Grammar> grammar = std::move(b_).Build(root_id);
  if (!grammar.ok()) return BuildError(grammar.status());
  return std::make_shared<const Grammar>(*std::move(grammar));
}

absl::Status GbnfCompiler::Rule() {
  const size_t start = i_;
  while (More() && IsNameChar(Peek())) ++i_;
  if (i_ == start) return Error(i_, absl::StrCat(Unexpected(), ": expected a rule name"));
  const std::string name(t_.substr(start, i_ - start));
  SkipSpace(false);
  if (!absl::StartsWith(t_.substr(i_), "::=")) {
    return Error(i_, absl::StrCat("expected '::=' after rule name '", name, "'"));
  }
  i_ += 3;
  NamedRule& rule = Named(name);
  if (rule.defined_at != kNone) {
    return Error(start, absl::StrCat("rule '", name, "' is defined twice (first at ",
                                     Where(rule.defined_at), ")"));
  }
  rule.defined_at = start;
  const int32_t id = rule.id;
  current_ = name;
  SkipSpace(true);
  Alternatives alts;
  RETURN_IF_ERROR(Alternates(/*nested=*/false, 0, &alts));
  if (More() && Peek() != '\n') return Error(i_, Unexpected());
  for (auto& alt : alts) b_.AddAlternative(id, std::move(alt));
  return CheckSize(i_);
}

absl::Status GbnfCompiler::Alternates(bool nested, int depth, Alternatives* alts) {
  for (;;) {
    std::vector<Symbol> seq;
    RETURN_IF_ERROR(Sequence(nested, depth, &seq));
    alts->push_back(std::move(seq));
    if (!nested && More() && Peek() == '\n') ContinuationFollows();
    if (!More() || Peek() != '|') return absl::OkStatus();
    ++i_;
    SkipSpace(true);
  }
}

absl::Status GbnfCompiler::Sequence(bool nested, int depth, std::vector<Symbol>* seq) {
  for (;;) {
    SkipSpace(nested);
    if (!More()) return absl::OkStatus();
    const char c = Peek();
    if (c == '|' || c == ')' || c == '\n') return absl::OkStatus();
    std::vector<Symbol> piece;
    RETURN_IF_ERROR(Primary(depth, &piece));
    for (;;) {
      SkipSpace(nested);
      if (!More()) break;
      const char s = Peek();
      if (s != '*' && s != '+' && s != '?' && s != '{') break;
      RETURN_IF_ERROR(Repetition(&piece));
    }
    seq->insert(seq->end(), piece.begin(), piece.end());
  }
}

absl::Status GbnfCompiler::Primary(int depth, std::vector<Symbol>* piece) {
  const size_t at = i_;
  const char c = Peek();
  if (c == '"') return Literal(piece);
  if (c == '[') return Class(piece);
  if (c == '.') {
    ++i_;
    piece->push_back(SetSymbol(ComplementScalarRanges({}), "any"));
    return CheckSize(at);
  }
  if (c == '(') {
    if (depth >= limits_.max_depth) {
      return Error(at, absl::StrCat("parentheses nested deeper than ", limits_.max_depth));
    }
    ++i_;
    SkipSpace(true);
    Alternatives alts;
    RETURN_IF_ERROR(Alternates(/*nested=*/true, depth + 1, &alts));
    if (!More()) return Error(at, "unterminated group: expected ')'");
    ++i_;  // the ')': a nested sequence stops only there, at a '|' or at the end
    if (alts.size() == 1) {
      *piece = std::move(alts[0]);
      return absl::OkStatus();
    }
    const int32_t rule = b_.NewRule(HelperName("group"));
    for (auto& alt : alts) b_.AddAlternative(rule, std::move(alt));
    piece->push_back(b_.Ref(rule));
    return CheckSize(at);
  }
  if (IsNameChar(c)) {
    while (More() && IsNameChar(Peek())) ++i_;
    NamedRule& rule = Named(t_.substr(at, i_ - at));
    if (rule.first_use == kNone) rule.first_use = at;
    piece->push_back(b_.Ref(rule.id));
    return absl::OkStatus();
  }
  return Error(at, Unexpected());
}

absl::Status GbnfCompiler::Literal(std::vector<Symbol>* piece) {
  const size_t open = i_++;
  std::string bytes;
  for (;;) {
    if (!More()) return Error(open, "unterminated literal");
    if (Peek() == '"') break;
    uint32_t cp;
    RETURN_IF_ERROR(CodePoint(&cp));
    AppendUtf8(cp, &bytes);
  }
  ++i_;
  b_.AppendLiteral(bytes, piece);
  return CheckSize(open);
}

absl::Status GbnfCompiler::Class(std::vector<Symbol>* piece) {
  const size_t open = i_++;
  const bool negated = More() && Peek() == '^';
  if (negated) ++i_;
  std::vector<CodePointRange> ranges;
  for (;;) {
    if (!More()) return Error(open, "unterminated character class");
    if (Peek() == ']') break;
    const size_t at = i_;
    uint32_t lo;
    RETURN_IF_ERROR(CodePoint(&lo));
    uint32_t hi = lo;
    if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
      ++i_;
      RETURN_IF_ERROR(CodePoint(&hi));
      if (hi < lo) {
        return Error(at, absl::StrFormat("bad class range: U+%04X is above U+%04X", lo, hi));
      }
    }
    ranges.push_back({lo, hi});
  }
  ++i_;
  std::vector<CodePointRange> set = NormalizeScalarRanges(std::move(ranges));
  if (negated) set = ComplementScalarRanges(set);
  if (set.empty()) return Error(open, "character class matches nothing");
  piece->push_back(SetSymbol(set, HelperName("class")));
  return CheckSize(open);
}

absl::Status GbnfCompiler::CodePoint(uint32_t* cp) {
  if (Peek() == '\\') return Escape(cp);
  const int n = DecodeUtf8(t_.substr(i_), cp);
  if (n == 0) return Error(i_, "invalid UTF-8");
  i_ += n;
  return absl::OkStatus();
}

absl::Status GbnfCompiler::Escape(uint32_t* cp) {
  const size_t at = i_;
  if (i_ + 1 >= t_.size()) return Error(at, "bad escape at the end of the text");
  const char e = t_[i_ + 1];
  i_ += 2;
  int digits = 0;
  switch (e) {
    case 'n':
      *cp = '\n';
      return absl::OkStatus();
    case 'r':
      *cp = '\r';
      return absl::OkStatus();
    case 't':
      *cp = '\t';
      return absl::OkStatus();
    case '\\':
    case '"':
    case '\'':
    case '[':
    case ']':
    case '-':
    case '^':
    case '/':
      *cp = static_cast<uint8_t>(e);
      return absl::OkStatus();
    case 'x':
      digits = 2;
      break;
    case 'u':
      digits = 4;
      break;
    case 'U':
      digits = 8;
      break;
    default:
      return Error(at, absl::StrCat("bad escape '\\", CharText(e), "'"));
  }
  uint32_t value = 0;
  for (int k = 0; k < digits; ++k) {
    if (!More() || HexValue(Peek()) < 0) {
      return Error(at, absl::StrCat("bad escape '\\", std::string(1, e), "': expected ", digits,
                                    " hex digits"));
    }
    value = value * 16 + HexValue(Peek());
    ++i_;
  }
  if (value > kMaxCodePoint || IsSurrogate(value)) {
    return Error(at, absl::StrFormat("bad escape: U+%04X is not a Unicode scalar value", value));
  }
  *cp = value;
  return absl::OkStatus();
}

absl::Status GbnfCompiler::Count(size_t open, int* out, bool* present) {
  const size_t start = i_;
  int64_t value = 0;
  while (More() && absl::ascii_isdigit(Peek())) {
    value = std::min<int64_t>(value * 10 + (Peek() - '0'), int64_t{1} << 40);
    ++i_;
  }
  *present = i_ > start;
  if (value > limits_.max_repeat) {
    return Error(open, absl::StrCat("repetition count ", t_.substr(start, i_ - start),
                                    " is over the limit of ", limits_.max_repeat));
  }
  *out = static_cast<int>(value);
  return absl::OkStatus();
}

absl::Status GbnfCompiler::Repetition(std::vector<Symbol>* piece) {
  const size_t at = i_;
  const char c = t_[i_++];
  int min = 0;
  int max = -1;
  if (c == '+') {
    min = 1;
  } else if (c == '?') {
    max = 1;
  } else if (c == '{') {
    bool has_min;
    bool has_max = false;
    SkipSpace(false);
    RETURN_IF_ERROR(Count(at, &min, &has_min));
    SkipSpace(false);
    if (More() && Peek() == ',') {
      ++i_;
      SkipSpace(false);
      RETURN_IF_ERROR(Count(at, &max, &has_max));
      SkipSpace(false);
      if (!has_min && !has_max) return Error(at, "bad repetition bounds: {,} has no count");
      if (!has_max) max = -1;
    } else {
      if (!has_min) return Error(at, "bad repetition bounds: expected a count");
      max = min;
    }
    if (!More() || Peek() != '}') return Error(at, "bad repetition bounds: expected '}'");
    ++i_;
    if (max >= 0 && max < min) {
      return Error(at, absl::StrCat("bad repetition bounds: {", min, ",", max,
                                    "} has its maximum below its minimum"));
    }
  }
  if (piece->empty() || (min == 1 && max == 1)) return absl::OkStatus();  // "" repeated is ""
  if (max == 0) {
    piece->clear();
    return absl::OkStatus();
  }
  Symbol item = (*piece)[0];
  if (piece->size() > 1) {
    const int32_t seq = b_.NewRule(HelperName("seq"));
    b_.AddAlternative(seq, std::move(*piece));
    item = b_.Ref(seq);
  }
  const int32_t rule = b_.Repeat(HelperName("repeat"), item, min, max);
  *piece = {b_.Ref(rule)};
  return CheckSize(at);
}

GbnfCompiler::NamedRule& GbnfCompiler::Named(absl::string_view name) {
  auto it = rules_.find(name);
  if (it == rules_.end()) {
    NamedRule rule;
    rule.id = b_.NewRule(name);
    it = rules_.emplace(std::string(name), rule).first;
  }
  return it->second;
}

Symbol GbnfCompiler::SetSymbol(const std::vector<CodePointRange>& normalized,
                               absl::string_view name) {
  auto it = sets_.find(normalized);
  if (it == sets_.end()) {
    it = sets_.emplace(normalized, Utf8SetSymbol(normalized, name, &b_)).first;
  }
  return it->second;
}

absl::Status GbnfCompiler::CheckSize(size_t pos) const {
  if (!b_.over_limit()) return absl::OkStatus();
  return Error(pos, absl::StrCat("grammar over ", limits_.max_elements, " elements"));
}

absl::Status GbnfCompiler::BuildError(const absl::Status& status) const {
  // The builder names the rule as "grammar: rule NAME-ID is left-recursive", NAME being a
  // GBNF rule or one of its helpers ("rule/what").
  constexpr absl::string_view kPrefix = "grammar: rule ";
  constexpr absl::string_view kSuffix = " is left-recursive";
  const absl::string_view message = status.message();
  if (!absl::StartsWith(message, kPrefix) || !absl::EndsWith(message, kSuffix)) {
    return absl::InvalidArgumentError(absl::StrCat("gbnf: ", message));
  }
  absl::string_view name =
      message.substr(kPrefix.size(), message.size() - kPrefix.size() - kSuffix.size());
  name = name.substr(0, name.rfind('-'));
  name = name.substr(0, name.find('/'));
  const auto it = rules_.find(name);
  const size_t at = it == rules_.end() ? 0 : it->second.defined_at;
  return Error(at, absl::StrCat("rule '", name, "' is left-recursive (", message, ")"));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileGbnf(absl::string_view text,
                                                           const GbnfLimits& limits) {
  return GbnfCompiler(text, limits).Compile();
}

}  // namespace pagoda::grammar
