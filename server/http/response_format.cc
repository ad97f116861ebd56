#include "server/http/response_format.h"

#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "server/http/json_span.h"

namespace pagoda::server::http {

namespace {

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// llama.cpp's `grammar` (GBNF text); null or absent: none.
absl::Status ParseGrammar(const nlohmann::json& body, engine::SamplingParams* sampling) {
  const auto it = body.find("grammar");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return Bad("grammar", "must be a string (a GBNF grammar)");
  if (sampling->grammar != nullptr) {
    return Bad("grammar", "cannot be combined with a json response_format");
  }
  auto compiled = grammar::CompileGbnf(it->get<std::string>());
  if (!compiled.ok()) return Bad("grammar", std::string(compiled.status().message()));
  sampling->grammar = *std::move(compiled);
  return absl::OkStatus();
}

// The schema's text with its keys in the order sent: its span of `body_text` when that
// parses to the same value, else the parsed value written out (keys sorted).
std::string SchemaText(const nlohmann::json& schema, std::string_view body_text) {
  if (!body_text.empty()) {
    const std::optional<std::string_view> span =
        FindJsonValue(body_text, {"response_format", "json_schema", "schema"});
    if (span && nlohmann::json::parse(*span, nullptr, /*allow_exceptions=*/false) == schema) {
      return std::string(*span);
    }
  }
  return schema.dump();
}

absl::Status ParseFormat(const nlohmann::json& body, std::string_view body_text,
                         engine::SamplingParams* sampling) {
  const auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  const nlohmann::json& f = *it;
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string()) {
    return Bad("response_format", "must be an object with a string \"type\"");
  }
  const std::string type = f["type"].get<std::string>();
  if (type == "text") return absl::OkStatus();
  if (type == "json_object") {
    sampling->grammar = grammar::JsonObjectGrammar();
    return absl::OkStatus();
  }
  if (type != "json_schema") {
    return Bad("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  }
  const auto js = f.find("json_schema");
  if (js == f.end() || !js->is_object()) {
    return Bad("response_format.json_schema", "must be an object");
  }
  if (const auto name = js->find("name"); name != js->end() && !name->is_string()) {
    return Bad("response_format.json_schema.name", "must be a string");
  }
  if (const auto strict = js->find("strict");
      strict != js->end() && !strict->is_boolean() && !strict->is_null()) {
    return Bad("response_format.json_schema.strict", "must be true or false");
  }
  const auto schema = js->find("schema");
  if (schema == js->end() || !(schema->is_object() || schema->is_boolean())) {
    return Bad("response_format.json_schema.schema", "must be a JSON Schema object");
  }
  auto compiled = grammar::CompileJsonSchema(SchemaText(*schema, body_text));
  if (!compiled.ok()) {
    return Bad("response_format.json_schema.schema", std::string(compiled.status().message()));
  }
  sampling->grammar = *std::move(compiled);
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseResponseFormat(const nlohmann::json& body, std::string_view body_text,
                                 engine::SamplingParams* sampling) {
  if (!body.is_object()) return absl::OkStatus();
  if (absl::Status format = ParseFormat(body, body_text, sampling); !format.ok()) return format;
  return ParseGrammar(body, sampling);
}

}  // namespace pagoda::server::http
