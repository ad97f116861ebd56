// Tool calls in a model's output: the text split into content and the calls written in a
// ToolCallFormat (chat/tool_call_format.h). A call that is not well formed (not JSON, no
// name, arguments not an object) is left as content, so a model that merely talks about a
// call, or wrote a broken one, answers with text: tool_choice "auto"'s fallback.
// ToolCallStreamParser (chat/tool_call_stream.h) gives the same result in pieces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_format.h"
#include "chat/tool_call_id.h"

namespace pagoda::chat {

struct ToolCall {
  std::string id;         // from the ToolCallIdSource
  std::string name;       // the function's name as the model wrote it
  std::string arguments;  // a JSON object, compact, keys in the order written
};

struct ParsedToolCalls {
  // The text outside the calls, without the whitespace that separated it from them.
  std::string content;
  std::vector<ToolCall> tool_calls;
};

// Splits a whole output. Ids are drawn from `ids` in call order. With `offered`, a call to
// a function not in it stays content (tool_choice "auto" never reports a call to a tool the
// request did not offer).
ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::string_view text,
                               const ToolCallIdSource& ids, const OfferedTools* offered = nullptr);

}  // namespace pagoda::chat
