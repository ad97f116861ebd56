#include "engine/chat_prompt.h"

#include <ctime>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "chat/chat_template.h"
#include "chat/template_source.h"
#include "chat/tool_prompt.h"
#include "model/gguf.h"

namespace pagoda::engine {
namespace {

// The messages as OpenAI-style JSON for the template. A tool call's arguments are given as
// the object they spell (templates print them with tojson, as Hugging Face's and
// llama.cpp's renderers get them), or as the string when it is not JSON. An assistant turn
// with calls and no text has content null, as OpenAI clients send it.
nlohmann::json MessagesJson(const std::vector<ChatMessage>& messages) {
  nlohmann::json list = nlohmann::json::array();
  for (const ChatMessage& m : messages) {
    nlohmann::json turn = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      nlohmann::json calls = nlohmann::json::array();
      for (const ChatToolCall& c : m.tool_calls) {
        nlohmann::json arguments = nlohmann::json::parse(c.arguments, nullptr, false);
        if (arguments.is_discarded()) arguments = c.arguments;
        calls.push_back({{"id", c.id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", std::move(arguments)}}}});
      }
      turn["tool_calls"] = std::move(calls);
      if (m.content.empty()) turn["content"] = nullptr;
    }
    if (!m.tool_call_id.empty()) turn["tool_call_id"] = m.tool_call_id;
    if (!m.reasoning_content.empty()) turn["reasoning_content"] = m.reasoning_content;
    list.push_back(std::move(turn));
  }
  return list;
}

// Two tool definitions in OpenAI's form, for templates that read `tools`.
nlohmann::json ProbeTools() {
  nlohmann::json tools = nlohmann::json::array();
  for (const char* name : {"get_weather", "search"}) {
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", name},
                       {"description", "A tool of the start-up probe."},
                       {"parameters",
                        {{"type", "object"},
                         {"properties",
                          {{"query", {{"type", "string"}, {"description", "what to look up"}}},
                           {"limit", {{"type", "integer"}}},
                           {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                         {"required", {"query"}}}}}}});
  }
  return tools;
}

// A longer conversation than the one-user probe: a system message, eight user/assistant
// turns and a last user message (and tools when the template reads `tools`), so a
// template whose cost grows with the conversation meets its budget at start-up rather
// than on every request. Only an exceeded budget fails: a template may refuse a
// conversation shape (raise_exception) on purpose.
absl::Status ProbeLongConversation(const chat::ChatTemplate& t, chat::RenderOptions options) {
  std::vector<chat::ChatMessage> messages = {{"system", "You are a helpful assistant."}};
  for (int turn = 1; turn <= 8; ++turn) {
    messages.push_back({"user", absl::StrCat("Question ", turn, ": what is ", turn, " + 1?")});
    messages.push_back({"assistant", absl::StrCat("Answer ", turn, ": ", turn + 1, ".")});
  }
  messages.push_back({"user", "Thanks. One more?"});
  if (t.source().find("tools") != std::string::npos) options.extra_context["tools"] = ProbeTools();
  absl::StatusOr<std::string> probe = t.Render(messages, options);
  if (probe.ok() || !chat::IsBudgetExceeded(probe.status())) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("a conversation of ", messages.size(), " messages: ", probe.status().message()));
}

// Parses `source` and renders a one-user conversation with it, then a longer one under
// the same budgets: a template that fails either is no use for any request.
absl::StatusOr<chat::ChatTemplate> ParseAndProbe(std::string source,
                                                 const chat::RenderOptions& options) {
  absl::StatusOr<chat::ChatTemplate> t = chat::ChatTemplate::Parse(std::move(source));
  if (!t.ok()) return t.status();
  absl::StatusOr<std::string> probe = t->Render({{"user", "Hello"}}, options);
  if (!probe.ok()) return probe.status();
  absl::Status long_probe = ProbeLongConversation(*t, options);
  if (!long_probe.ok()) return long_probe;
  return t;
}

}  // namespace

ChatPrompt::~ChatPrompt() = default;

absl::StatusOr<std::unique_ptr<ChatPrompt>> ChatPrompt::Create(const gguf::GgufFile& file,
                                                               const std::string& override_source,
                                                               std::string bos_text,
                                                               std::string eos_text,
                                                               bool strip_bos) {
  std::unique_ptr<ChatPrompt> p(new ChatPrompt());
  p->bos_text_ = std::move(bos_text);
  p->eos_text_ = std::move(eos_text);
  p->strip_bos_ = strip_bos;
  chat::RenderOptions options{
      .bos_token = p->bos_text_, .eos_token = p->eos_text_, .now = std::time(nullptr)};
  if (!override_source.empty()) {
    absl::StatusOr<chat::ChatTemplate> t = ParseAndProbe(override_source, options);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("chat_template (--chat-template): ", t.status().message()));
    }
    p->template_ = std::make_unique<chat::ChatTemplate>(*std::move(t));
    p->reads_tools_ = chat::TemplateReadsTools(override_source);
    return p;
  }
  absl::StatusOr<std::string> source = chat::ChatTemplateFromGguf(file);
  if (!source.ok()) {
    p->unusable_ = absl::FailedPreconditionError(
        absl::StrCat("messages: ", source.status().message(),
                     "; start the daemon with --chat-template FILE to chat with it"));
    return p;
  }
  absl::StatusOr<chat::ChatTemplate> t = ParseAndProbe(*std::move(source), options);
  if (!t.ok()) {
    p->unusable_ = absl::FailedPreconditionError(
        absl::StrCat("messages: the model's chat template cannot be rendered (",
                     t.status().message(), "); give one with --chat-template FILE"));
    return p;
  }
  p->template_ = std::make_unique<chat::ChatTemplate>(*std::move(t));
  p->reads_tools_ = chat::TemplateReadsTools(p->template_->source());
  return p;
}

std::string_view ChatPrompt::source() const {
  return template_ == nullptr ? std::string_view() : std::string_view(template_->source());
}

absl::StatusOr<std::string> ChatPrompt::Render(const std::vector<ChatMessage>& messages,
                                               bool add_generation_prompt,
                                               const nlohmann::ordered_json* tools,
                                               const nlohmann::json* kwargs) const {
  absl::StatusOr<ChatPromptText> out =
      RenderWithSpans(messages, add_generation_prompt, tools, kwargs);
  if (!out.ok()) return out.status();
  return std::move(out->text);
}

absl::StatusOr<ChatPromptText> ChatPrompt::RenderWithSpans(const std::vector<ChatMessage>& messages,
                                                           bool add_generation_prompt,
                                                           const nlohmann::ordered_json* tools,
                                                           const nlohmann::json* kwargs) const {
  if (template_ == nullptr) return unusable_;
  if (messages.empty()) return absl::InvalidArgumentError("messages: is empty");
  chat::RenderOptions options{.add_generation_prompt = add_generation_prompt,
                              .bos_token = bos_text_,
                              .eos_token = eos_text_,
                              .strip_leading_bos = strip_bos_,
                              .now = std::time(nullptr)};
  if (kwargs != nullptr) options.extra_context = *kwargs;
  nlohmann::json turns = MessagesJson(messages);
  if (tools != nullptr && reads_tools_) options.tools = *tools;
  if (tools != nullptr && !reads_tools_) {
    const std::string offer = chat::ToolsSystemPrompt(*tools, tool_call_format_);
    if (turns[0]["role"] == "system") {
      turns[0]["content"] = absl::StrCat(messages[0].content, "\n\n", offer);
    } else {
      turns.insert(turns.begin(), nlohmann::json{{"role", "system"}, {"content", offer}});
    }
  }
  absl::StatusOr<chat::RenderedChat> out = template_->RenderJsonWithSpans(turns, options);
  if (!out.ok()) {
    return absl::Status(out.status().code(), absl::StrCat("messages: ", out.status().message()));
  }
  ChatPromptText prompt{.text = std::move(out->text)};
  prompt.content.reserve(out->content.size());
  for (const chat::Span& s : out->content) prompt.content.push_back({s.begin, s.end});
  return prompt;
}

absl::StatusOr<std::vector<int32_t>> EncodeChatPrompt(const model::Tokenizer& tok,
                                                      const std::vector<ChatMessage>& messages,
                                                      const ChatPromptText& prompt,
                                                      bool content_special) {
  if (content_special) return tok.Encode(prompt.text, tok.add_bos(), /*parse_special=*/true);
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (tok.Encode(role, false, /*parse_special=*/true) != tok.Encode(role, false, false)) {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "].role: spells a special token"));
    }
  }
  return tok.EncodeWithPlainRanges(prompt.text, tok.add_bos(), prompt.content);
}

}  // namespace pagoda::engine
