#include "chat/chat_template.h"

#include <exception>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "chat/ast.h"
#include "chat/error.h"
#include "chat/interpreter.h"
#include "chat/lexer.h"
#include "chat/parser.h"
#include "chat/spans.h"
#include "chat/value.h"

namespace pagoda::chat {
namespace {

// Marks the status of an exceeded budget (IsBudgetExceeded).
constexpr char kBudgetPayload[] = "pagoda.chat/budget_exceeded";

absl::Status ToStatus(const TemplateError& e) {
  std::string where = e.line > 0 ? absl::StrCat("chat template line ", e.line, ": ")
                                 : std::string("chat template: ");
  if (e.kind == "unsupported") return absl::UnimplementedError(absl::StrCat(where, e.what()));
  if (e.kind == "raised") {
    return absl::InvalidArgumentError(absl::StrCat(where, "raise_exception: ", e.what()));
  }
  absl::Status status = absl::InvalidArgumentError(absl::StrCat(where, e.what()));
  if (e.kind == "budget") status.SetPayload(kBudgetPayload, absl::Cord("1"));
  return status;
}

// Any other exception out of the renderer (an allocation that failed, a library's
// length_error) is the template's error too: the daemon never dies of a template.
absl::Status ToStatus(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return absl::InvalidArgumentError("chat template: out of memory");
  }
  return absl::InvalidArgumentError(absl::StrCat("chat template: render failed: ", e.what()));
}

// Python's strftime on local time.
std::string FormatTime(const std::string& format, std::time_t now) {
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
  return std::string(buf, n);
}

// range(stop), range(start, stop[, step]): its length charged before it is built.
Value Range(const CallArgs& args, Budget& budget) {
  int64_t p[3] = {0, 0, 1};
  size_t n = args.positional.size();
  if (n < 1 || n > 3) throw TemplateError("runtime", "range takes 1 to 3 args", 0);
  for (size_t k = 0; k < n; ++k) {
    if (args.positional[k].kind != Value::Kind::kInt) {
      throw TemplateError("runtime", "range takes integers", 0);
    }
  }
  if (n == 1) {
    p[1] = args.positional[0].i;
  } else {
    for (size_t k = 0; k < n; ++k) p[k] = args.positional[k].i;
  }
  const int64_t start = p[0], stop = p[1], step = p[2];
  if (step == 0) throw TemplateError("runtime", "range step is zero", 0);
  // ceil(|stop - start| / |step|) in unsigned arithmetic: no int64 overflow.
  const bool up = step > 0;
  const uint64_t span = up ? (stop > start ? uint64_t(stop) - uint64_t(start) : 0)
                           : (start > stop ? uint64_t(start) - uint64_t(stop) : 0);
  const uint64_t stride = up ? uint64_t(step) : uint64_t(0) - uint64_t(step);
  const uint64_t count = span == 0 ? 0 : 1 + (span - 1) / stride;
  budget.Steps(count);
  budget.Bytes(kContainerBytes);
  budget.Bytes(count, sizeof(Value));
  Array out;
  out.reserve(count);
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t offset = k * stride;  // <= span: the value stays between start and stop
    out.push_back(
        Value::Int(static_cast<int64_t>(up ? uint64_t(start) + offset : uint64_t(start) - offset)));
  }
  return Value::MakeArray(std::move(out));
}

// Global functions: raise_exception, namespace, range, strftime_now, dict. They charge
// `budget`, which outlives every value of the render.
void AddGlobalFunctions(Object& g, std::optional<std::time_t> now, Budget& budget) {
  Budget* meter = &budget;
  g.emplace_back("raise_exception", Value::Func([meter](CallArgs& args) -> Value {
                   Value msg = args.positional.empty() ? Value() : args.positional[0];
                   throw TemplateError("raised", msg.ToString(*meter), 0);
                 }));
  auto make_object = [meter](CallArgs& args) -> Value {
    meter->Bytes(kContainerBytes);
    meter->Bytes(args.keyword.size(), sizeof(std::pair<std::string, Value>));
    Object o;
    for (auto& [k, v] : args.keyword) o.emplace_back(k, std::move(v));
    return Value::MakeObject(std::move(o));
  };
  g.emplace_back("namespace", Value::Func(make_object));
  g.emplace_back("dict", Value::Func(make_object));
  g.emplace_back("range",
                 Value::Func([meter](CallArgs& args) -> Value { return Range(args, *meter); }));
  g.emplace_back("strftime_now", Value::Func([now](CallArgs& args) -> Value {
                   if (args.positional.empty() || !args.positional[0].IsString()) {
                     throw TemplateError("runtime", "strftime_now takes a format string", 0);
                   }
                   if (!now.has_value()) {
                     throw TemplateError("runtime", "strftime_now: the caller gave no clock", 0);
                   }
                   return Value::Str(FormatTime(args.positional[0].s, *now));
                 }));
}

// llama.cpp's message workarounds: "developer" is "system" (except for templates with
// <|channel|> markers, gpt-oss), and when the template has no system role the system
// message is prepended to the next message's content (or dropped when alone).
nlohmann::json AdaptMessages(const nlohmann::json& messages, bool system_role, bool map_developer) {
  nlohmann::json out = messages;
  if (map_developer) {
    for (auto& m : out) {
      if (m.value("role", "") == "developer") m["role"] = "system";
    }
  }
  if (system_role || out.empty() || out[0].value("role", "") != "system") return out;
  if (out.size() > 1 && out[0]["content"].is_string() && out[1]["content"].is_string()) {
    out[1]["content"] =
        out[0]["content"].get<std::string>() + "\n" + out[1]["content"].get<std::string>();
  }
  out.erase(out.begin());
  return out;
}

// The messages as a template value, every string in them marked as content (chat/spans.h)
// except each message's role, which templates turn into markup (Phi-3's '<|' + role + '|>').
Value ContentValue(const nlohmann::json& messages, const Budget& budget) {
  Value v = Value::FromJson(messages, budget);
  MarkAllContent(&v);
  if (!v.IsArray()) return v;
  for (Value& m : *v.array) {
    if (!m.IsObject()) continue;
    for (auto& [key, field] : *m.object) {
      if (key == "role") field.spans.clear();
    }
  }
  return v;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source) {
  ChatTemplate t;
  try {
    auto program = std::make_shared<std::vector<NodePtr>>(chat::Parse(Tokenize(source)));
    t.program_ = std::move(program);
  } catch (const TemplateError& e) {
    return ToStatus(e);
  } catch (const std::exception& e) {
    return ToStatus(e);
  }
  t.source_ = std::make_shared<const std::string>(std::move(source));
  // As llama.cpp's capability probe: a template that never prints the system message's
  // content (or refuses it) does not support the system role.
  t.supports_system_role_ = true;
  RenderOptions probe;
  probe.now = 0;
  // A tenth of the default steps and bytes: real templates need a hundredth of that for
  // two messages, and a hostile one costs its parser a tenth of a render.
  probe.budget.max_steps /= 10;
  probe.budget.max_bytes /= 10;
  const nlohmann::json messages = {{{"role", "system"}, {"content", "System message"}},
                                   {{"role", "user"}, {"content", "User message"}}};
  absl::StatusOr<std::string> out = t.RenderJson(messages, probe);
  t.supports_system_role_ = out.ok() && out->find("System message") != std::string::npos;
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 const RenderOptions& options) const {
  absl::StatusOr<RenderedChat> out = RenderWithSpans(messages, options);
  if (!out.ok()) return out.status();
  return std::move(out->text);
}

absl::StatusOr<std::string> ChatTemplate::RenderJson(const nlohmann::json& messages,
                                                     const RenderOptions& options) const {
  absl::StatusOr<RenderedChat> out = RenderJsonWithSpans(messages, options);
  if (!out.ok()) return out.status();
  return std::move(out->text);
}

absl::StatusOr<RenderedChat> ChatTemplate::RenderWithSpans(const std::vector<ChatMessage>& messages,
                                                           const RenderOptions& options) const {
  nlohmann::json list = nlohmann::json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return RenderJsonWithSpans(list, options);
}

absl::StatusOr<RenderedChat> ChatTemplate::RenderJsonWithSpans(const nlohmann::json& messages,
                                                               const RenderOptions& options) const {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be an array");
  for (const auto& m : messages) {
    if (!m.is_object()) return absl::InvalidArgumentError("each message must be an object");
  }
  if (!options.extra_context.is_object()) {
    return absl::InvalidArgumentError("extra_context must be a JSON object");
  }
  // Declared before every value of the render: the functions among them point to it.
  Budget budget(options.budget);
  SpannedText out;
  try {
    Object globals;
    nlohmann::json adapted = AdaptMessages(messages, supports_system_role_,
                                           source_->find("<|channel|>") == std::string::npos);
    AddGlobalFunctions(globals, options.now, budget);
    globals.emplace_back("messages", ContentValue(adapted, budget));
    if (!options.tools.is_null()) {
      Value tools = Value::FromJson(options.tools, budget);
      MarkAllContent(&tools);
      globals.emplace_back("tools", std::move(tools));
    }
    globals.emplace_back("bos_token", Value::Str(options.bos_token));
    globals.emplace_back("eos_token", Value::Str(options.eos_token));
    // As llama.cpp: the variable exists only when true.
    if (options.add_generation_prompt) {
      globals.emplace_back("add_generation_prompt", Value::Bool(true));
    }
    for (const auto& [k, v] : options.extra_context.items()) {
      // The caller's values are content, as the messages are: a string there cannot forge
      // the template's markup.
      Value value = Value::FromJson(v, budget);
      MarkAllContent(&value);
      globals.insert(globals.begin(), {k, std::move(value)});  // before the defaults
    }
    out = Execute(*program_, Value::MakeObject(std::move(globals)), budget);
  } catch (const TemplateError& e) {
    return ToStatus(e);
  } catch (const std::exception& e) {
    return ToStatus(e);
  }
  RenderedChat rendered{std::move(out.text), std::move(out.spans)};
  const std::string& bos = options.bos_token;
  if (options.strip_leading_bos && !bos.empty() && rendered.text.starts_with(bos)) {
    rendered.text.erase(0, bos.size());
    rendered.content = SliceSpans(rendered.content, bos.size(), bos.size() + rendered.text.size());
  }
  return rendered;
}

bool IsBudgetExceeded(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument &&
         status.GetPayload(kBudgetPayload).has_value();
}

}  // namespace pagoda::chat
