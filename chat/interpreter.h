// Executes a parsed template against a set of global variables.
#pragma once

#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/budget.h"
#include "chat/spans.h"
#include "chat/value.h"

namespace pagoda::chat {

// Renders `program` with `globals` (an object value: variables and global functions)
// visible; throws TemplateError on an unsupported construct, a type error or
// raise_exception, and TemplateError("budget") when the render would exceed `budget`.
// Undefined variables render empty; attributes of undefined are undefined (llama.cpp's
// lenient behaviour); operations on undefined values are errors. The result's spans are
// the bytes that came from content strings (chat/spans.h).
SpannedText Execute(const std::vector<NodePtr>& program, const Value& globals, Budget& budget);

}  // namespace pagoda::chat
