// Splits template source into tokens, applying Jinja's whitespace control the way
// llama.cpp's renderer does (trim_blocks and lstrip_blocks on, `-` markers).
#pragma once

#include <string>
#include <vector>

namespace pagoda::chat {

struct Token {
  enum class Kind {
    kText,       // literal output between tags
    kOpenExpr,   // {{
    kCloseExpr,  // }}
    kOpenStmt,   // {%
    kCloseStmt,  // %}
    kName,       // identifier or keyword
    kString,     // string literal (escapes resolved)
    kInt,        // integer literal
    kFloat,      // float literal
    kOp,         // operator or punctuation: + - * / // % ** ~ | . , : ( ) [ ] { } = == != < > <= >=
    kEnd,        // end of source
  };
  Kind kind;
  std::string text;
  int line;  // 1-based
};

// Tokenizes a whole template; throws TemplateError("syntax") on an unterminated tag,
// comment or string, an unknown escape or an unexpected character.
std::vector<Token> Tokenize(const std::string& source);

}  // namespace pagoda::chat
