#include "chat/tool_call_stream.h"

#include <utility>

#include "chat/tool_call_scan.h"

namespace pagoda::chat {

ToolCallStreamParser::ToolCallStreamParser(ToolCallFormat format, ToolCallIdSource ids,
                                           std::shared_ptr<const OfferedTools> offered)
    : format_(format), ids_(std::move(ids)), offered_(std::move(offered)) {}

ToolCallStreamDelta ToolCallStreamParser::Feed(std::string_view piece) {
  pending_.append(piece);
  return Scan(internal::SettledLength(format_, pending_, at_start_), /*at_end=*/false);
}

ToolCallStreamDelta ToolCallStreamParser::Finish() {
  return Scan(pending_.size(), /*at_end=*/true);
}

ToolCallStreamDelta ToolCallStreamParser::Scan(size_t length, bool at_end) {
  ToolCallStreamDelta delta;
  if (length == 0 && !at_end) return delta;
  internal::ScannedRegion region =
      internal::ScanRegion(format_, std::string_view(pending_).substr(0, length), at_start_,
                           after_call_, at_end, offered_.get());
  pending_.erase(0, length);
  at_start_ = false;
  after_call_ = region.after_call;
  delta.content = std::move(region.content);
  // A call is complete when it is scanned, so its whole arguments go in its first delta
  // (clients append argument fragments, so one fragment reads like many).
  for (internal::ScannedCall& call : region.calls) {
    delta.tool_calls.push_back(
        ToolCallDelta{next_index_++, ids_(), std::move(call.name), std::move(call.arguments)});
  }
  return delta;
}

}  // namespace pagoda::chat
