#include "chat/lexer.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

constexpr const char* kSpace = " \t\r\n";

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// Normalizes line ends to \n and drops one trailing newline, as Jinja's default does.
std::string Normalize(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      out.push_back('\n');
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      out.push_back(source[k]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> Run() {
    while (pos_ < src_.size()) {
      LexText();
      if (pos_ >= src_.size()) break;
      LexTag();
    }
    tokens_.push_back({Token::Kind::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  char At(size_t k) const { return k < src_.size() ? src_[k] : '\0'; }
  bool TagStartsAt(size_t k) const {
    return At(k) == '{' && (At(k + 1) == '{' || At(k + 1) == '%' || At(k + 1) == '#');
  }
  [[noreturn]] void Fail(const std::string& msg) const {
    throw TemplateError("syntax", msg, line_);
  }
  void Advance(size_t n) {
    for (size_t k = 0; k < n && pos_ < src_.size(); ++k) {
      if (src_[pos_++] == '\n') ++line_;
    }
  }

  // Text up to the next tag, with the whitespace rules of the tags on both sides.
  void LexText() {
    size_t start = pos_;
    int start_line = line_;
    size_t end = start;
    while (end < src_.size() && !TagStartsAt(end)) ++end;
    std::string_view next_open(src_.data() + end, std::min<size_t>(3, src_.size() - end));
    size_t keep = end;
    // lstrip_blocks: spaces between a line start and a {% or {# tag go. (llama.cpp also
    // drops a single non-space character at the very start of the source here; that
    // loses text, so this renderer does not copy it.)
    if (end < src_.size() && (At(end + 1) == '%' || At(end + 1) == '#')) {
      size_t k = end;
      while (k > start && src_[k - 1] != '\n' && IsSpace(src_[k - 1])) --k;
      if (k == 0 || src_[k - 1] == '\n') keep = k;
    }
    std::string text = src_.substr(start, keep - start);
    // trim_blocks: one newline after a %}, #} or -}} tag goes.
    if (prev_close_ == '%' || prev_close_ == '#' || prev_close_ == '-') {
      if (!text.empty() && text.front() == '\n') text.erase(0, 1);
    }
    if (prev_close_ == '-') {
      size_t first = text.find_first_not_of(kSpace);
      text.erase(0, first == std::string::npos ? text.size() : first);
    }
    if (next_open.size() == 3 && next_open[2] == '-') {
      size_t last = text.find_last_not_of(kSpace);
      text.erase(last == std::string::npos ? 0 : last + 1);
    }
    Advance(end - start);
    if (!text.empty()) tokens_.push_back({Token::Kind::kText, std::move(text), start_line});
  }

  void LexTag() {
    char type = At(pos_ + 1);
    if (type == '#') {
      size_t close = src_.find("#}", pos_ + 2);
      if (close == std::string::npos) Fail("unterminated comment {#");
      prev_close_ = src_[close - 1] == '-' ? '-' : '#';
      Advance(close + 2 - pos_);
      return;
    }
    bool expr = type == '{';
    tokens_.push_back({expr ? Token::Kind::kOpenExpr : Token::Kind::kOpenStmt, "", line_});
    Advance(2);
    if (At(pos_) == '-') Advance(1);
    int depth = 0;  // braces of dict literals inside the tag
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) Advance(1);
      if (pos_ >= src_.size()) Fail(expr ? "unterminated {{" : "unterminated {%");
      char c = src_[pos_];
      if (c == '-' && At(pos_ + 1) == (expr ? '}' : '%') && At(pos_ + 2) == '}' && depth == 0) {
        Close(expr, '-', 3);
        return;
      }
      if (!expr && c == '%' && At(pos_ + 1) == '}') {
        Close(expr, '%', 2);
        return;
      }
      if (expr && c == '}' && At(pos_ + 1) == '}' && depth == 0) {
        Close(expr, '}', 2);
        return;
      }
      if (c == '{') ++depth;
      if (c == '}') --depth;
      LexInner();
    }
  }

  void Close(bool expr, char marker, size_t length) {
    tokens_.push_back({expr ? Token::Kind::kCloseExpr : Token::Kind::kCloseStmt, "", line_});
    prev_close_ = marker;
    Advance(length);
  }

  void LexInner() {
    char c = src_[pos_];
    int line = line_;
    if (c == '\'' || c == '"') {
      tokens_.push_back({Token::Kind::kString, LexString(c), line});
      return;
    }
    if (IsDigit(c)) {
      size_t k = pos_;
      while (IsDigit(At(k))) ++k;
      bool is_float = At(k) == '.' && IsDigit(At(k + 1));
      if (is_float) {
        ++k;
        while (IsDigit(At(k))) ++k;
      }
      tokens_.push_back(
          {is_float ? Token::Kind::kFloat : Token::Kind::kInt, src_.substr(pos_, k - pos_), line});
      Advance(k - pos_);
      return;
    }
    if (IsNameStart(c)) {
      size_t k = pos_;
      while (IsNameChar(At(k))) ++k;
      tokens_.push_back({Token::Kind::kName, src_.substr(pos_, k - pos_), line});
      Advance(k - pos_);
      return;
    }
    static const char* kTwo[] = {"==", "!=", "<=", ">=", "//", "**"};
    for (const char* op : kTwo) {
      if (c == op[0] && At(pos_ + 1) == op[1]) {
        tokens_.push_back({Token::Kind::kOp, op, line});
        Advance(2);
        return;
      }
    }
    if (std::string("+-*/%~|.,:()[]{}=<>!").find(c) != std::string::npos) {
      tokens_.push_back({Token::Kind::kOp, std::string(1, c), line});
      Advance(1);
      return;
    }
    Fail(absl::StrCat("unexpected character '", std::string(1, c), "' in tag"));
  }

  std::string LexString(char quote) {
    Advance(1);
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) Fail("unterminated string literal");
      char c = src_[pos_];
      if (c == quote) break;
      if (c == '\\') {
        char e = At(pos_ + 1);
        switch (e) {
          case 'n':
            out.push_back('\n');
            break;
          case 't':
            out.push_back('\t');
            break;
          case 'r':
            out.push_back('\r');
            break;
          case 'b':
            out.push_back('\b');
            break;
          case 'f':
            out.push_back('\f');
            break;
          case 'v':
            out.push_back('\v');
            break;
          case '\\':
            out.push_back('\\');
            break;
          case '\'':
            out.push_back('\'');
            break;
          case '"':
            out.push_back('"');
            break;
          default:
            Fail(absl::StrCat("unknown escape \\", std::string(1, e), " in string"));
        }
        Advance(2);
        continue;
      }
      out.push_back(c);
      Advance(1);
    }
    Advance(1);
    return out;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  char prev_close_ = '\0';  // last character before the closing "}" of the previous tag
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Tokenize(const std::string& source) { return Lexer(Normalize(source)).Run(); }

}  // namespace pagoda::chat
