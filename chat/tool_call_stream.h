// Tool calls parsed as the output is generated, for streamed chat responses: each piece of
// text yields the content and the tool-call deltas that are certain by then. Text that may
// still become (or end) a call is held back: a possible marker at the end, an open
// `<tool_call>` block, a Llama output that starts like a JSON call, Mistral's calls after
// `[TOOL_CALLS]`, and whitespace that may turn out to separate content from a call.
// Concatenating every delta (content; per call index: id and name from the first, the
// arguments appended) gives exactly ParseToolCalls' result for the whole output.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_format.h"
#include "chat/tool_call_id.h"

namespace pagoda::chat {

// OpenAI's delta.tool_calls[] entry.
struct ToolCallDelta {
  int index = 0;          // the call's position among the output's calls
  std::string id;         // set in a call's first delta only
  std::string name;       // set in a call's first delta only
  std::string arguments;  // a fragment of the arguments' JSON text
};

struct ToolCallStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return content.empty() && tool_calls.empty(); }
};

class ToolCallStreamParser {
 public:
  // `offered` (may be null: any name; else kept alive by the parser): as ParseToolCalls'.
  ToolCallStreamParser(ToolCallFormat format, ToolCallIdSource ids,
                       std::shared_ptr<const OfferedTools> offered = nullptr);

  // Takes the next piece of the output (any split, even inside a UTF-8 character).
  ToolCallStreamDelta Feed(std::string_view piece);
  // The output has ended: everything still held back.
  ToolCallStreamDelta Finish();

 private:
  ToolCallStreamDelta Scan(size_t length, bool at_end);

  ToolCallFormat format_;
  ToolCallIdSource ids_;
  std::shared_ptr<const OfferedTools> offered_;
  std::string pending_;  // the output not yet scanned (what is held back)
  bool at_start_ = true;
  bool after_call_ = false;
  int next_index_ = 0;
};

}  // namespace pagoda::chat
