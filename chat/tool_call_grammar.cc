#include "chat/tool_call_grammar.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pagoda::chat {
namespace {

using grammar::ElementKind;
using grammar::Grammar;
using grammar::GrammarBuilder;
using grammar::Symbol;

// Copies every rule of `g` into `b`; returns the id `g`'s root has there. Each tool's
// schema is compiled on its own (its $refs resolve against its own root) and then joined.
int32_t Import(const Grammar& g, GrammarBuilder* b) {
  std::vector<int32_t> ids(g.num_rules());
  for (int32_t r = 0; r < g.num_rules(); ++r) ids[r] = b->NewRule(g.rule_name(r));
  for (int32_t r = 0; r < g.num_rules(); ++r) {
    for (const int32_t start : g.alternatives(r)) {
      std::vector<Symbol> sequence;
      for (int32_t pos = start; g.element(pos).kind != ElementKind::kEnd; ++pos) {
        const grammar::Element& e = g.element(pos);
        sequence.push_back(e.kind == ElementKind::kBytes ? b->Bytes(g.byte_set(e.arg))
                                                         : b->Ref(ids[e.arg]));
      }
      b->AddAlternative(ids[r], std::move(sequence));
    }
  }
  return ids[g.root()];
}

absl::Status OverLimit(size_t max) {
  return absl::InvalidArgumentError(absl::StrCat(
      "tools: the grammar of the calls to these tools is over ", max, " elements in all"));
}

// The rule of one call of `tool`: the JSON object with its name and arguments.
absl::StatusOr<int32_t> CallRule(ToolCallFormat format, size_t index, const ToolDefinition& tool,
                                 const grammar::SchemaLimits& limits, GrammarBuilder* b) {
  const auto where = [&] { return absl::StrCat("tools[", index, "] (", tool.name, "): "); };
  nlohmann::json schema = tool.parameters;
  if (schema.empty()) schema = {{"type", "object"}};
  if (const auto type = schema.find("type"); type != schema.end() && *type != "object") {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), "parameters: the type must be \"object\""));
  }
  // Each tool's schema gets what the tools before it left of the joined grammar's budget.
  grammar::SchemaLimits left = limits;
  left.max_elements = b->max_size() - std::min(b->size(), b->max_size());
  auto compiled = grammar::CompileJsonSchema(schema.dump(), left);
  if (!compiled.ok()) {
    // Whatever the cause, say what the tools before it took of the budget they share.
    return absl::InvalidArgumentError(
        absl::StrCat(where(), compiled.status().message(), " (the calls' grammar had ", b->size(),
                     " of the ", limits.max_elements, " elements it may have before this tool)"));
  }
  const int32_t arguments = Import(**compiled, b);
  if (b->over_limit()) return OverLimit(b->max_size());
  const char* key = format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
  std::vector<Symbol> sequence;
  b->AppendLiteral(
      absl::StrCat("{\"name\": ", nlohmann::json(tool.name).dump(), ", \"", key, "\": "),
      &sequence);
  sequence.push_back(b->Ref(arguments));
  b->AppendLiteral("}", &sequence);
  const int32_t rule = b->NewRule("tool_call");
  b->AddAlternative(rule, std::move(sequence));
  return rule;
}

// The format's frame around one or more calls of rule `call`.
int32_t Frame(ToolCallFormat format, int32_t call, bool parallel, GrammarBuilder* b) {
  const int max = parallel ? -1 : 1;
  if (format == ToolCallFormat::kHermes) {
    const int32_t block = b->NewRule("tool_call_block");
    std::vector<Symbol> sequence;
    b->AppendLiteral("<tool_call>\n", &sequence);
    sequence.push_back(b->Ref(call));
    b->AppendLiteral("\n</tool_call>", &sequence);
    b->AddAlternative(block, std::move(sequence));
    return b->Repeat("tool_call_blocks", b->Ref(block), 1, max, b->LiteralRule("\n"));
  }
  if (format == ToolCallFormat::kMistral) {
    const int32_t calls = b->Repeat("tool_call_list", b->Ref(call), 1, max, b->LiteralRule(", "));
    const int32_t rule = b->NewRule("tool_calls");
    std::vector<Symbol> sequence;
    b->AppendLiteral("[TOOL_CALLS][", &sequence);
    sequence.push_back(b->Ref(calls));
    b->AppendLiteral("]", &sequence);
    b->AddAlternative(rule, std::move(sequence));
    return rule;
  }
  return call;  // Llama 3.1: the whole output is one call
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> BuildToolCallGrammar(
    ToolCallFormat format, const std::vector<ToolDefinition>& tools,
    const ToolGrammarOptions& options) {
  if (format == ToolCallFormat::kNone) {
    return absl::InvalidArgumentError("tool calls: the chat template has no tool-call format");
  }
  // One budget for all the tools together: each one's schema may not take it all again.
  GrammarBuilder b(options.limits.max_elements);
  const int32_t any_call = b.NewRule("any_tool_call");
  bool found = false;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (!options.function.empty() && tools[i].name != options.function) continue;
    auto call = CallRule(format, i, tools[i], options.limits, &b);
    if (!call.ok()) return call.status();
    b.AddAlternative(any_call, {b.Ref(*call)});
    found = true;
  }
  if (!found) {
    return absl::InvalidArgumentError(
        options.function.empty()
            ? std::string("tool calls: no tools given")
            : absl::StrCat("tool_choice: no tool named '", options.function, "'"));
  }
  const int32_t root = Frame(format, any_call, options.parallel, &b);
  if (b.over_limit()) return OverLimit(b.max_size());
  auto built = std::move(b).Build(root);
  if (!built.ok()) return built.status();
  return std::make_shared<const Grammar>(*std::move(built));
}

}  // namespace pagoda::chat
