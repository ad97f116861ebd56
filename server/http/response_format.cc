#include "server/http/response_format.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "grammar/json_schema.h"

namespace pagoda::server::http {

absl::Status ParseResponseFormat(const nlohmann::json& body, engine::SamplingParams* sampling) {
  auto bad = [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  };
  if (!body.is_object()) return absl::OkStatus();
  const auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  const nlohmann::json& f = *it;
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string()) {
    return bad("response_format", "must be an object with a string \"type\"");
  }
  const std::string type = f["type"].get<std::string>();
  if (type == "text") return absl::OkStatus();
  if (type == "json_object") {
    sampling->grammar = grammar::JsonObjectGrammar();
    return absl::OkStatus();
  }
  if (type != "json_schema") {
    return bad("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  }
  const auto js = f.find("json_schema");
  if (js == f.end() || !js->is_object()) {
    return bad("response_format.json_schema", "must be an object");
  }
  if (const auto name = js->find("name"); name != js->end() && !name->is_string()) {
    return bad("response_format.json_schema.name", "must be a string");
  }
  if (const auto strict = js->find("strict");
      strict != js->end() && !strict->is_boolean() && !strict->is_null()) {
    return bad("response_format.json_schema.strict", "must be true or false");
  }
  const auto schema = js->find("schema");
  if (schema == js->end() || !(schema->is_object() || schema->is_boolean())) {
    return bad("response_format.json_schema.schema", "must be a JSON Schema object");
  }
  auto compiled = grammar::CompileJsonSchema(schema->dump());
  if (!compiled.ok()) {
    return bad("response_format.json_schema.schema", std::string(compiled.status().message()));
  }
  sampling->grammar = *std::move(compiled);
  return absl::OkStatus();
}

}  // namespace pagoda::server::http
