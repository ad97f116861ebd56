// Tools for chat templates that do not read them: many templates (Gemma 2, Phi-3.5,
// DeepSeek R1 distills, ...) never print the `tools` variable, so a request's tools would
// be invisible to the model. For those the tools and the call syntax go into a system
// message instead, as vLLM and TGI do.
#pragma once

#include <string>
#include <string_view>

#include "chat/tool_call_format.h"
#include "nlohmann/json.hpp"

namespace pagoda::chat {

// True when `template_source` names the `tools` variable (the word `tools`, not a longer
// identifier such as `xml_tools` or `tool_calls`).
bool TemplateReadsTools(std::string_view template_source);

// The system-message text offering `tools` (chat::ToolsTemplateJson's array, one compact
// JSON object per line) and, for a format with call syntax, how to write a call in it, so
// that what the model writes is what `format`'s parser reads.
std::string ToolsSystemPrompt(const nlohmann::ordered_json& tools, ToolCallFormat format);

}  // namespace pagoda::chat
