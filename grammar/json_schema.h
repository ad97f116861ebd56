// Grammars for JSON output: any JSON object (OpenAI's response_format json_object) and
// a JSON Schema subset (json_schema). The subset, the whitespace policy and what each
// keyword becomes are in docs/API.md ("Structured outputs"). A keyword outside the subset
// is refused by name, never ignored.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grammar/grammar.h"

namespace pagoda::grammar {

// Budgets on what a schema may cost to compile.
struct SchemaLimits {
  int max_depth = 64;                // nesting of subschemas (and $ref expansions)
  size_t max_text_bytes = 16 << 20;  // the schema's JSON text (an HTTP body's limit)
  int max_text_depth = 160;          // nesting of the schema's JSON text (objects and arrays)
  int64_t max_text_values = int64_t{1} << 20;  // its array elements and object members
  int max_repeat = 2048;          // largest finite minItems/maxItems/minLength/maxLength
  size_t max_elements = 1 << 20;  // grammar size
  // Objects are parsed keeping their key order, which costs each object its member count
  // squared: at most this much in all (a 4096-member object costs 1 << 24).
  int64_t max_member_work = int64_t{1} << 25;
};

// Any JSON object: "{" ... "}" with any members, values of any type.
std::shared_ptr<const Grammar> JsonObjectGrammar();

// The language of JSON texts valid against `schema` (JSON text of the schema itself).
// InvalidArgument naming the keyword and its place ("json schema: unsupported keyword
// 'minimum' at /properties/age") for keywords outside the subset, malformed values, a
// dangling $ref, a left-recursive $ref, or a schema over `limits` (objects too large to
// parse in order included).
absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(absl::string_view schema,
                                                                 const SchemaLimits& limits = {});

}  // namespace pagoda::grammar
