// Chat templates: renders a model's `tokenizer.chat_template` (a Jinja template) for a
// list of messages, as llama.cpp's server does with --jinja. The Jinja subset covers what
// real templates use; anything outside it is an error naming the construct and line.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chat/budget.h"
#include "chat/value.h"

namespace pagoda::chat {

struct Node;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

struct RenderOptions {
  bool add_generation_prompt = true;  // end with the assistant turn's header
  std::string bos_token;              // the vocabulary's BOS text ("<|begin_of_text|>")
  std::string eos_token;              // the vocabulary's EOS text
  // Drop bos_token from the start of the result (the tokenizer adds BOS itself).
  bool strip_leading_bos = false;
  // The `tools` variable: OpenAI-style tool objects in the order their keys are to print
  // (chat/tool_definitions.h, ToolsTemplateJson); null leaves it undefined (no tools). Its
  // strings are content, as the messages' are: a tool's description cannot forge markup.
  nlohmann::ordered_json tools;
  // More template variables (date_string, enable_thinking, ...); must be a JSON object. Its
  // strings are content, as the messages' are.
  nlohmann::json extra_context = nlohmann::json::object();
  // The clock strftime_now() reads: the caller's (the engine passes the current time, tests
  // the time their references were made at). The renderer never reads the clock itself:
  // unset, a template that calls strftime_now() gets an error.
  std::optional<std::time_t> now;
  // What the render may spend (steps, bytes, value nesting, call depth).
  RenderBudget budget;
};

// A rendered prompt and its content spans: the byte ranges [begin, end) of `text` that came
// from the messages' string fields other than `role` (sorted, disjoint; chat/spans.h).
// Special-token text there is the caller's text, not the template's.
struct RenderedChat {
  std::string text;
  Spans content;
};

// True for the InvalidArgument of a render that would have exceeded its RenderBudget.
bool IsBudgetExceeded(const absl::Status& status);

class ChatTemplate {
 public:
  // Parses `source`; InvalidArgument for a syntax error, Unimplemented for a Jinja
  // statement outside the subset (both name the line). Probes the system role with one
  // render under a tenth of the default RenderBudget (failing it means no system role).
  static absl::StatusOr<ChatTemplate> Parse(std::string source);

  // Renders `messages` (after llama.cpp's role workarounds, see supports_system_role);
  // InvalidArgument carrying the message of the template's
  // raise_exception() or a type error, Unimplemented for an unsupported filter, test or
  // method (each naming the line); InvalidArgument "chat template: step budget (N)
  // exceeded" (or byte, value depth, call depth) when the render would exceed
  // options.budget. Never throws.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     const RenderOptions& options) const;

  // As Render, with messages as OpenAI-style JSON objects (extra fields are visible to
  // the template); InvalidArgument when `messages` is not an array of objects.
  absl::StatusOr<std::string> RenderJson(const nlohmann::json& messages,
                                         const RenderOptions& options) const;

  // As Render and RenderJson, with the content spans of the result.
  absl::StatusOr<RenderedChat> RenderWithSpans(const std::vector<ChatMessage>& messages,
                                               const RenderOptions& options) const;
  absl::StatusOr<RenderedChat> RenderJsonWithSpans(const nlohmann::json& messages,
                                                   const RenderOptions& options) const;

  // False when the template ignores or refuses a system message (then Render merges it
  // into the next message, as llama.cpp does).
  bool supports_system_role() const { return supports_system_role_; }

  // The template text as given to Parse.
  const std::string& source() const { return *source_; }

 private:
  ChatTemplate() = default;
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> program_;
  bool supports_system_role_ = true;
};

}  // namespace pagoda::chat
