#include "chat/tool_call_format.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace pagoda::chat {

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone:
      return "none";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
  }
  return "none";
}

absl::StatusOr<std::optional<ToolCallFormat>> ParseToolCallFormatFlag(std::string_view value) {
  const std::string v = absl::AsciiStrToLower(absl::string_view(value.data(), value.size()));
  if (v == "auto") return std::optional<ToolCallFormat>();
  if (v == "none") return ToolCallFormat::kNone;
  if (v == "hermes" || v == "qwen") return ToolCallFormat::kHermes;
  if (v == "llama3_json" || v == "llama3") return ToolCallFormat::kLlama3Json;
  if (v == "mistral") return ToolCallFormat::kMistral;
  return absl::InvalidArgumentError(
      absl::StrCat("tool call parser '", std::string(value),
                   "': expected auto, none, hermes, llama3_json or mistral"));
}

ToolCallFormat DetectToolCallFormat(std::string_view source) {
  const auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  // Templates that wrap a non-JSON body in <tool_call> (Qwen3-Coder's XML, GLM's
  // key/value tags): the Hermes parser would turn every such call into content, so we
  // claim no format rather than a wrong one.
  if (has("<tool_call>")) {
    return has("<function=") || has("<arg_key>") ? ToolCallFormat::kNone : ToolCallFormat::kHermes;
  }
  if (has("[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (has("<|python_tag|>") || has("\"parameters\"")) return ToolCallFormat::kLlama3Json;
  return ToolCallFormat::kNone;
}

}  // namespace pagoda::chat
