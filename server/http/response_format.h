// OpenAI's "response_format" on chat and completions: the grammar that constrains the
// output (grammar/json_schema.h), or none.
#pragma once

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "engine/request.h"

namespace pagoda::server::http {

// Absent, null or {"type": "text"}: no grammar. {"type": "json_object"}: any JSON object.
// {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}}:
// the schema's grammar (`strict` may be true or false: the output always follows the
// schema). Sets sampling->grammar; InvalidArgument naming the field, or the schema keyword
// the compiler does not support ("response_format.json_schema.schema: json schema:
// unsupported keyword 'minimum' at /properties/age").
absl::Status ParseResponseFormat(const nlohmann::json& body, engine::SamplingParams* sampling);

}  // namespace pagoda::server::http
