// Parses template tokens into a statement list.
#pragma once

#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace pagoda::chat {

// Parses a whole template; throws TemplateError ("syntax" for malformed input,
// "unsupported" for a Jinja construct outside the supported subset), naming the line.
std::vector<NodePtr> Parse(const std::vector<Token>& tokens);

}  // namespace pagoda::chat
