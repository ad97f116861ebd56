// OpenAI's "response_format" on chat and completions, and llama.cpp's "grammar": the
// grammar that constrains the output (grammar/json_schema.h, grammar/gbnf.h), or none.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "absl/status/status.h"
#include "engine/request.h"

namespace pagoda::server::http {

// Absent, null or {"type": "text"}: no grammar. {"type": "json_object"}: any JSON object.
// {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}}:
// the schema's grammar (`strict` may be true or false: the output always follows the
// schema). Sets sampling->grammar; InvalidArgument naming the field, or the schema keyword
// the compiler does not support ("response_format.json_schema.schema: json schema:
// unsupported keyword 'minimum' at /properties/age"). "grammar": a GBNF grammar's text
// (llama.cpp's server field), refused beside a json response_format. `body_text` (may be
// empty) is the text `body` was parsed from: the schema is taken from it, so that its
// properties keep the order sent (json_span.h); without it they come sorted.
absl::Status ParseResponseFormat(const nlohmann::json& body, std::string_view body_text,
                                 engine::SamplingParams* sampling);

}  // namespace pagoda::server::http
