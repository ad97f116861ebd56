// The format-specific scanning shared by ParseToolCalls and ToolCallStreamParser (internal
// to the tool-call library). Text is processed in regions: a region never ends inside a
// call or a possible call marker, nor in whitespace that trimming might still remove, so
// scanning the regions one after another gives the same result as scanning the whole
// output at once. That is what makes the streamed deltas add up to the non-streamed parse.
//
// Content is the text outside well-formed calls, with the whitespace between a call and
// its neighbouring content removed (the newline a model writes between `</tool_call>` and
// the next block is not content). A malformed call stays content, byte for byte.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_format.h"

namespace pagoda::chat::internal {

struct ScannedCall {
  std::string name;
  std::string arguments;  // compact JSON
};

struct ScannedRegion {
  std::string content;
  std::vector<ScannedCall> calls;
  // True when the region ended with a call and only whitespace after it (the next
  // region's leading whitespace is then trimmed).
  bool after_call = false;
};

// How much of `text` (the unscanned rest of the output, not its end) can be scanned now:
// text after it could still be, or end, a call. `at_start`: `text` begins the output.
size_t SettledLength(ToolCallFormat format, std::string_view text, bool at_start);

// Scans `region` (a prefix of the unscanned text no longer than SettledLength, or all of it
// when `at_end`). `after_call`: the previous region's after_call. A call to a function
// not in `offered` (when not null) stays content.
ScannedRegion ScanRegion(ToolCallFormat format, std::string_view region, bool at_start,
                         bool after_call, bool at_end, const OfferedTools* offered);

}  // namespace pagoda::chat::internal
