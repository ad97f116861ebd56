#include "server/http/tokenize_routes.h"

#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"
#include "server/http/openai_tools.h"

namespace pagoda::server::http {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// The boolean `key` (the first of `keys` present); nullopt when absent or null.
absl::StatusOr<std::optional<bool>> BoolField(const json& body,
                                              std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_boolean()) return Bad(key, "must be true or false");
    return it->get<bool>();
  }
  return std::nullopt;
}

// A token's piece as llama-server reports it: its bytes as a string, or an array of byte
// values when they are not valid UTF-8 alone (a byte token).
json PieceJson(const engine::Engine& engine, int32_t id) {
  const std::string bytes = engine.TokenBytes(id);
  if (engine::IsValidUtf8(bytes)) return bytes;
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

absl::StatusOr<std::string> TokenizeBody(const engine::Engine& engine, const json& body) {
  if (!body.is_object()) return Bad("body", "must be a JSON object");
  const char* field = body.contains("content") ? "content" : "prompt";
  auto it = body.find(field);
  if (it == body.end() || !it->is_string()) return Bad(field, "must be a string");
  absl::StatusOr<std::optional<bool>> add_special =
      BoolField(body, {"add_special", "add_special_tokens"});
  if (!add_special.ok()) return add_special.status();
  absl::StatusOr<std::optional<bool>> parse_special = BoolField(body, {"parse_special"});
  if (!parse_special.ok()) return parse_special.status();
  absl::StatusOr<std::optional<bool>> with_pieces = BoolField(body, {"with_pieces"});
  if (!with_pieces.ok()) return with_pieces.status();
  absl::StatusOr<std::vector<int32_t>> ids = engine.Tokenize(
      it->get_ref<const std::string&>(), *add_special, parse_special->value_or(true));
  if (!ids.ok()) {
    // The engine names its own parameter ("text: ...").
    std::string message(ids.status().message());
    if (absl::StartsWith(message, "text:")) message = field + message.substr(4);
    return absl::Status(ids.status().code(), message);
  }
  json tokens = json::array();
  for (int32_t id : *ids) {
    if (with_pieces->value_or(false)) {
      tokens.push_back({{"id", id}, {"piece", PieceJson(engine, id)}});
    } else {
      tokens.push_back(id);
    }
  }
  return Dump({{"tokens", std::move(tokens)},
               {"count", ids->size()},
               {"max_model_len", engine.model_info().context_length}});
}

absl::StatusOr<std::string> DetokenizeBody(const engine::Engine& engine, const json& body) {
  if (!body.is_object()) return Bad("body", "must be a JSON object");
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) return Bad("tokens", "must be an array of integers");
  std::vector<int32_t> ids;
  for (const json& id : *it) {
    if (!id.is_number_integer()) return Bad("tokens", "must be an array of integers");
    const int64_t x = id.get<int64_t>();
    if (x < 0 || x > std::numeric_limits<int32_t>::max()) {
      return Bad("tokens", absl::StrCat(x, " is outside the vocabulary"));
    }
    ids.push_back(static_cast<int32_t>(x));
  }
  absl::StatusOr<std::string> text = engine.Detokenize(ids);
  if (!text.ok()) {
    // The engine names its own parameter ("token_ids: ...").
    std::string message(text.status().message());
    if (absl::StartsWith(message, "token_ids:")) message = "tokens:" + message.substr(10);
    return absl::Status(text.status().code(), message);
  }
  return Dump({{"content", *text}, {"prompt", *text}});
}

absl::StatusOr<std::string> ApplyTemplateBody(const engine::Engine& engine, const json& body) {
  absl::StatusOr<std::vector<engine::ChatMessage>> messages = ParseMessages(body);
  if (!messages.ok()) return messages.status();
  bool add_generation_prompt = true;
  if (auto it = body.find("add_generation_prompt"); it != body.end() && it->is_boolean()) {
    add_generation_prompt = it->get<bool>();
  }
  absl::StatusOr<std::optional<ChatToolsRequest>> tools = ParseChatTools(body);
  if (!tools.ok()) return tools.status();
  std::optional<nlohmann::ordered_json> tools_json;
  if (tools->has_value()) tools_json = chat::ToolsTemplateJson((*tools)->tools);
  const json* kwargs = nullptr;
  if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
    kwargs = &*it;  // the engine checks it is an object naming none of the template's own
  }
  absl::StatusOr<std::string> prompt = engine.RenderChat(
      *messages, add_generation_prompt, tools_json.has_value() ? &*tools_json : nullptr, kwargs);
  if (!prompt.ok()) return prompt.status();
  return Dump({{"prompt", *prompt}});
}

}  // namespace pagoda::server::http
