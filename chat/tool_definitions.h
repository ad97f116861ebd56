// The functions a chat request offers the model (OpenAI's `tools`), checked once at the
// door so the template, the grammar and the parser can rely on their shape.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pagoda::chat {

struct ToolDefinition {
  std::string name;
  std::string description;
  // The arguments' JSON schema; an empty object when the tool gave none.
  nlohmann::json parameters = nlohmann::json::object();
};

// Reads `tools`: an array of {"type": "function", "function": {"name", "description"?,
// "parameters"?, "strict"?}}. InvalidArgument naming the place ("tools[1].function.name:
// ...") for another shape, an empty or repeated name, or parameters that are not an object.
absl::StatusOr<std::vector<ToolDefinition>> ParseToolDefinitions(const nlohmann::json& tools);

// The `tools` variable for chat templates (chat::RenderOptions::tools): each tool as
// {"type": "function", "function": {"name", "description", "parameters"}} (the last two
// when given), which templates print with `tojson`. The request's key order is gone once
// parsed, so schema objects list "type", "description", "enum", "properties", "items",
// "required" first and their other keys sorted: the order clients and model cards write.
nlohmann::ordered_json ToolsTemplateJson(const std::vector<ToolDefinition>& tools);

}  // namespace pagoda::chat
