#include "chat/tool_prompt.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace pagoda::chat {
namespace {

bool IsIdentifierByte(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// How a call is written in `format`; "" for kNone.
const char* CallSyntax(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "To call a function, write the call between <tool_call> and </tool_call>, one "
             "block per call:\n<tool_call>\n{\"name\": \"<function name>\", \"arguments\": "
             "<the arguments as a JSON object>}\n</tool_call>";
    case ToolCallFormat::kLlama3Json:
      return "To call a function, answer with nothing but the call as one JSON object:\n"
             "{\"name\": \"<function name>\", \"parameters\": <the arguments as a JSON "
             "object>}";
    case ToolCallFormat::kMistral:
      return "To call functions, answer with [TOOL_CALLS] and then a JSON array of the "
             "calls:\n[TOOL_CALLS][{\"name\": \"<function name>\", \"arguments\": <the "
             "arguments as a JSON object>}]";
    case ToolCallFormat::kNone:
      break;
  }
  return "";
}

}  // namespace

bool TemplateReadsTools(std::string_view source) {
  constexpr std::string_view kWord = "tools";
  for (size_t at = source.find(kWord); at != std::string_view::npos;
       at = source.find(kWord, at + 1)) {
    const size_t end = at + kWord.size();
    if ((at == 0 || !IsIdentifierByte(source[at - 1])) &&
        (end == source.size() || !IsIdentifierByte(source[end]))) {
      return true;
    }
  }
  return false;
}

std::string ToolsSystemPrompt(const nlohmann::ordered_json& tools, ToolCallFormat format) {
  std::string out =
      "You can use these functions; each is described by one JSON object on its own line:";
  for (const nlohmann::ordered_json& tool : tools) {
    absl::StrAppend(&out, "\n",
                    tool.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  }
  if (const char* syntax = CallSyntax(format); *syntax != '\0') {
    absl::StrAppend(&out, "\n\n", syntax);
  }
  return out;
}

}  // namespace pagoda::chat
