// Fuzzes the chat-template interpreter (chat/): byte 0 picks the conversation and options,
// the rest is template source. Parse and Render never crash, hang or leak (a value that
// holds itself would leak: LeakSanitizer reports it); a refusal is InvalidArgument or
// Unimplemented with a message, an exceeded budget names its budget, and an output fits
// the byte budget.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "chat/chat_template.h"
#include "fuzz/fuzz_data.h"

namespace {

using pagoda::fuzz::Check;
namespace chat = pagoda::chat;

// Conversations by the low two bits of byte 0: none, one user message, system and user,
// and a system message with three user/assistant turns (the third reads as a tool call).
nlohmann::json Messages(int shape) {
  nlohmann::json m = nlohmann::json::array();
  if (shape >= 2) m.push_back({{"role", "system"}, {"content", "Be brief."}});
  if (shape >= 1) m.push_back({{"role", "user"}, {"content", "Hi {{ there }}\n"}});
  if (shape == 3) {
    m.push_back({{"role", "assistant"}, {"content", "<think>x</think>Hello."}});
    m.push_back({{"role", "user"}, {"content", "Weather?"}});
    m.push_back({{"role", "assistant"},
                 {"content", ""},
                 {"tool_calls",
                  {{{"id", "c1"},
                    {"type", "function"},
                    {"function", {{"name", "weather"}, {"arguments", {{"city", "Oslo"}}}}}}}}});
    m.push_back({{"role", "tool"}, {"content", "{\"t\": 3}"}, {"tool_call_id", "c1"}});
  }
  return m;
}

nlohmann::json Tools() {
  return nlohmann::json::parse(R"([{"type": "function", "function": {"name": "weather",
      "description": "Weather in a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
}

bool IsRefusal(const absl::Status& s) {
  return (s.code() == absl::StatusCode::kInvalidArgument ||
          s.code() == absl::StatusCode::kUnimplemented) &&
         !s.message().empty();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  absl::StatusOr<chat::ChatTemplate> t =
      chat::ChatTemplate::Parse(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  if (!t.ok()) {
    Check(IsRefusal(t.status()), "Parse failed with another code or no message");
    return 0;
  }
  chat::RenderOptions options;
  options.add_generation_prompt = (flags & 0x04) != 0;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.strip_leading_bos = (flags & 0x08) != 0;
  options.now = 86400 * 365;
  if ((flags & 0x10) != 0) options.extra_context["tools"] = Tools();
  if ((flags & 0x20) != 0) options.extra_context["enable_thinking"] = false;
  // Smaller than the defaults (each input stays fast under ASan); nesting and depth keep
  // their defaults, so the stack they allow is what runs here.
  options.budget.max_steps = 200'000;
  options.budget.max_bytes = 4 << 20;
  absl::StatusOr<std::string> out = t->RenderJson(Messages(flags & 3), options);
  if (out.ok()) {
    Check(out->size() <= static_cast<size_t>(options.budget.max_bytes),
          "output larger than the byte budget");
    return 0;
  }
  Check(IsRefusal(out.status()), "Render failed with another code or no message");
  if (chat::IsBudgetExceeded(out.status())) {
    Check(absl::StrContains(out.status().message(), " budget ("),
          "a budget error does not name its budget");
  }
  return 0;
}
