// The renderer's internal error: thrown inside chat/ only, turned into an absl::Status at
// the module boundary (ChatTemplate::Parse/Render).
#pragma once

#include <stdexcept>
#include <string>

namespace pagoda::chat {

struct TemplateError : std::runtime_error {
  // kind: "syntax" (lexer/parser), "unsupported", "runtime" or "raised" (raise_exception).
  TemplateError(std::string kind, std::string message, int line)
      : std::runtime_error(message), kind(std::move(kind)), line(line) {}
  std::string kind;
  int line;  // 1-based source line, 0 when unknown
};

}  // namespace pagoda::chat
