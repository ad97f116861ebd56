#include "chat/tool_calls.h"

#include <utility>

#include "chat/tool_call_scan.h"

namespace pagoda::chat {

ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::string_view text,
                               const ToolCallIdSource& ids, const OfferedTools* offered) {
  internal::ScannedRegion scanned = internal::ScanRegion(
      format, text, /*at_start=*/true, /*after_call=*/false, /*at_end=*/true, offered);
  ParsedToolCalls out;
  out.content = std::move(scanned.content);
  for (internal::ScannedCall& call : scanned.calls) {
    out.tool_calls.push_back(ToolCall{ids(), std::move(call.name), std::move(call.arguments)});
  }
  return out;
}

}  // namespace pagoda::chat
