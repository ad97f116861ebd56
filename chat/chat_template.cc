#include "chat/chat_template.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "chat/ast.h"
#include "chat/error.h"
#include "chat/interpreter.h"
#include "chat/lexer.h"
#include "chat/parser.h"
#include "chat/value.h"

namespace pagoda::chat {
namespace {

absl::Status ToStatus(const TemplateError& e) {
  std::string where = e.line > 0 ? absl::StrCat("chat template line ", e.line, ": ")
                                 : std::string("chat template: ");
  if (e.kind == "unsupported") return absl::UnimplementedError(absl::StrCat(where, e.what()));
  if (e.kind == "raised") {
    return absl::InvalidArgumentError(absl::StrCat(where, "raise_exception: ", e.what()));
  }
  return absl::InvalidArgumentError(absl::StrCat(where, e.what()));
}

// Python's strftime on local time.
std::string FormatTime(const std::string& format, std::time_t now) {
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
  return std::string(buf, n);
}

// Global functions: raise_exception, namespace, range, strftime_now, dict.
void AddGlobalFunctions(Object& g, std::optional<std::time_t> now) {
  g.emplace_back("raise_exception", Value::Func([](CallArgs& args) -> Value {
                   Value msg = args.positional.empty() ? Value() : args.positional[0];
                   throw TemplateError("raised", msg.ToString(), 0);
                 }));
  auto make_object = [](CallArgs& args) -> Value {
    Object o;
    for (auto& [k, v] : args.keyword) o.emplace_back(k, v);
    return Value::MakeObject(std::move(o));
  };
  g.emplace_back("namespace", Value::Func(make_object));
  g.emplace_back("dict", Value::Func(make_object));
  g.emplace_back("range", Value::Func([](CallArgs& args) -> Value {
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
                   if (p[2] == 0) throw TemplateError("runtime", "range step is zero", 0);
                   Array out;
                   for (int64_t v = p[0]; p[2] > 0 ? v < p[1] : v > p[1]; v += p[2]) {
                     if (out.size() > 1'000'000)
                       throw TemplateError("runtime", "range too long", 0);
                     out.push_back(Value::Int(v));
                   }
                   return Value::MakeArray(std::move(out));
                 }));
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

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source) {
  ChatTemplate t;
  try {
    auto program = std::make_shared<std::vector<NodePtr>>(chat::Parse(Tokenize(source)));
    t.program_ = std::move(program);
  } catch (const TemplateError& e) {
    return ToStatus(e);
  }
  t.source_ = std::make_shared<const std::string>(std::move(source));
  // As llama.cpp's capability probe: a template that never prints the system message's
  // content (or refuses it) does not support the system role.
  t.supports_system_role_ = true;
  RenderOptions probe;
  probe.now = 0;
  nlohmann::json messages = {{{"role", "system"}, {"content", "System message"}},
                             {{"role", "user"}, {"content", "User message"}}};
  absl::StatusOr<std::string> out = t.RenderJson(messages, probe);
  t.supports_system_role_ = out.ok() && out->find("System message") != std::string::npos;
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 const RenderOptions& options) const {
  nlohmann::json list = nlohmann::json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return RenderJson(list, options);
}

absl::StatusOr<std::string> ChatTemplate::RenderJson(const nlohmann::json& messages,
                                                     const RenderOptions& options) const {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be an array");
  for (const auto& m : messages) {
    if (!m.is_object()) return absl::InvalidArgumentError("each message must be an object");
  }
  if (!options.extra_context.is_object()) {
    return absl::InvalidArgumentError("extra_context must be a JSON object");
  }
  Object globals;
  nlohmann::json adapted = AdaptMessages(messages, supports_system_role_,
                                         source_->find("<|channel|>") == std::string::npos);
  AddGlobalFunctions(globals, options.now);
  globals.emplace_back("messages", Value::FromJson(adapted));
  globals.emplace_back("bos_token", Value::Str(options.bos_token));
  globals.emplace_back("eos_token", Value::Str(options.eos_token));
  // As llama.cpp: the variable exists only when true.
  if (options.add_generation_prompt)
    globals.emplace_back("add_generation_prompt", Value::Bool(true));
  for (const auto& [k, v] : options.extra_context.items()) {
    globals.insert(globals.begin(), {k, Value::FromJson(v)});  // found before the defaults
  }
  std::string out;
  try {
    out = Execute(*program_, Value::MakeObject(std::move(globals)));
  } catch (const TemplateError& e) {
    return ToStatus(e);
  }
  if (options.strip_leading_bos && !options.bos_token.empty() &&
      out.compare(0, options.bos_token.size(), options.bos_token) == 0) {
    out.erase(0, options.bos_token.size());
  }
  return out;
}

}  // namespace pagoda::chat
