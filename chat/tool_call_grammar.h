// The grammar for tool_choice "required" or a named function: the output is one call (or,
// with parallel calls, several) in the model's ToolCallFormat, each naming one of the
// tools and giving arguments valid against that tool's parameter schema
// (grammar/json_schema.h), so ParseToolCalls always finds the calls in it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/tool_call_format.h"
#include "chat/tool_definitions.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace pagoda::chat {

struct ToolGrammarOptions {
  // Only this tool (tool_choice {"type": "function", "function": {"name": ...}}); empty:
  // any of them (tool_choice "required").
  std::string function;
  // More than one call (parallel_tool_calls). Llama 3.1's format has room for one only.
  bool parallel = true;
  // Per tool's parameter schema; max_elements bounds the joined grammar of all the tools
  // (each schema compiles within what the ones before it left).
  grammar::SchemaLimits limits;
};

// The calls are written exactly as the templates show them, one space after each colon
// and comma of the frame: Hermes `<tool_call>\n{"name": "f", "arguments": ARGS}\n</tool_call>`
// (blocks separated by "\n"), Llama `{"name": "f", "parameters": ARGS}`, Mistral
// `[TOOL_CALLS][{"name": "f", "arguments": ARGS}, ...]` (the marker spelled in plain bytes:
// the mask never allows a control token). InvalidArgument for kNone, no tools, an unknown
// `function`, a parameter schema whose type is not "object", or a schema the compiler
// refuses ("tools[0] (get_weather): json schema: unsupported keyword ...").
absl::StatusOr<std::shared_ptr<const grammar::Grammar>> BuildToolCallGrammar(
    ToolCallFormat format, const std::vector<ToolDefinition>& tools,
    const ToolGrammarOptions& options = {});

}  // namespace pagoda::chat
