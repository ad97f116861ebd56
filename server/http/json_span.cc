#include "server/http/json_span.h"

namespace pagoda::server::http {
namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }

  // A string's raw text between its quotes; pos_ at the opening quote.
  std::optional<std::string_view> String() {
    if (!Eat('"')) return std::nullopt;
    const size_t begin = pos_;
    while (pos_ < text_.size() && text_[pos_] != '"') pos_ += text_[pos_] == '\\' ? 2 : 1;
    if (pos_ >= text_.size()) return std::nullopt;
    return text_.substr(begin, pos_++ - begin);
  }

  // Skips one value (nesting counted with a counter, not the stack); its text.
  std::optional<std::string_view> Value() {
    SkipSpace();
    const size_t begin = pos_;
    size_t depth = 0;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '"') {
        if (!String()) return std::nullopt;
      } else if (c == '{' || c == '[') {
        ++depth;
        ++pos_;
      } else if (c == '}' || c == ']') {
        if (depth == 0) break;  // the end of the enclosing value: a scalar ended here
        --depth;
        ++pos_;
      } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
        break;
      } else {
        ++pos_;
      }
      if (depth == 0 && (c == '"' || c == '}' || c == ']')) break;
    }
    if (pos_ == begin || depth != 0) return std::nullopt;
    return text_.substr(begin, pos_ - begin);
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

// The value of `step` directly inside the value `text`.
std::optional<std::string_view> Child(std::string_view text, const JsonStep& step) {
  Scanner s(text);
  std::optional<std::string_view> found;
  if (const auto* name = std::get_if<std::string_view>(&step)) {
    if (!s.Eat('{')) return std::nullopt;
    if (s.Eat('}')) return std::nullopt;
    do {
      const std::optional<std::string_view> key = s.String();
      if (!key || !s.Eat(':')) return std::nullopt;
      const std::optional<std::string_view> value = s.Value();
      if (!value) return std::nullopt;
      if (*key == *name) found = value;  // the last one wins, as in the parsed body
    } while (s.Eat(','));
    return s.Eat('}') ? found : std::nullopt;
  }
  const size_t index = std::get<size_t>(step);
  if (!s.Eat('[')) return std::nullopt;
  if (s.Eat(']')) return std::nullopt;
  size_t i = 0;
  do {
    const std::optional<std::string_view> value = s.Value();
    if (!value) return std::nullopt;
    if (i++ == index) found = value;
  } while (s.Eat(','));
  return s.Eat(']') ? found : std::nullopt;
}

}  // namespace

std::optional<std::string_view> FindJsonValue(std::string_view text,
                                              const std::vector<JsonStep>& path) {
  std::optional<std::string_view> at = text;
  for (const JsonStep& step : path) {
    at = Child(*at, step);
    if (!at) return std::nullopt;
  }
  return at;
}

}  // namespace pagoda::server::http
