// How a model writes tool calls in its output, one value per family of chat templates:
// which format a template teaches its model is read from the template's text, and a flag
// may name one instead (for templates that teach a format we cannot recognise).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"

namespace pagoda::chat {

// The functions a request offered, by name: a call naming any other stays content, as a
// malformed one does (null where a parser takes one: any name is a call).
using OfferedTools = absl::flat_hash_set<std::string>;

enum class ToolCallFormat {
  // No tool-call syntax: the whole output is content.
  kNone,
  // Hermes / Qwen2.5: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, any
  // number of blocks, with content around them.
  kHermes,
  // Llama 3.1 / 3.2 JSON: the whole output is `{"name": ..., "parameters": {...}}`,
  // optionally after `<|python_tag|>`.
  kLlama3Json,
  // Mistral: content, then `[TOOL_CALLS]` and a JSON array of {"name", "arguments"}
  // objects up to the end of the output (or the newer `[TOOL_CALLS]name[ARGS]{...}` form).
  kMistral,
};

// The flag spelling of `format`: "none", "hermes", "llama3_json", "mistral".
std::string_view ToolCallFormatName(ToolCallFormat format);

// A flag value: the names above (also "qwen" for hermes, "llama3" for llama3_json);
// "auto" is std::nullopt (read the format from the template). InvalidArgument otherwise,
// listing the accepted values.
absl::StatusOr<std::optional<ToolCallFormat>> ParseToolCallFormatFlag(std::string_view value);

// The format a chat template's source teaches: kHermes when it writes `<tool_call>` with a
// JSON body, kMistral for `[TOOL_CALLS]`, kLlama3Json for `<|python_tag|>` or a
// `"parameters"` object; kNone when it shows none of these (or a format we do not parse,
// such as Qwen3-Coder's `<function=...>` or GLM's `<arg_key>` inside `<tool_call>`).
ToolCallFormat DetectToolCallFormat(std::string_view template_source);

}  // namespace pagoda::chat
