// The tokenizer over HTTP: POST /tokenize and POST /detokenize (llama-server's shapes, with
// vLLM's field names accepted too). Bodies in, bodies out; the router authenticates and
// answers (HttpRouter::HandleJsonRoute).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "engine/engine.h"

namespace pagoda::server::http {

// {"content" | "prompt": text, "add_special" | "add_special_tokens": bool (unset: the
// model's default, as a completion's prompt), "parse_special": bool (default true),
// "with_pieces": bool (default false)} -> {"tokens": [id, ...], "count", "max_model_len"};
// with_pieces: "tokens" is [{"id", "piece"}], the piece the token's bytes as a string, or
// as an array of byte values when they are not valid UTF-8 alone (llama-server).
// InvalidArgument naming the field.
absl::StatusOr<std::string> TokenizeBody(const engine::Engine& engine, const nlohmann::json& body);

// {"tokens": [id, ...]} -> {"content": text} (and "prompt", vLLM's name). InvalidArgument
// naming the field ("tokens: ...").
absl::StatusOr<std::string> DetokenizeBody(const engine::Engine& engine,
                                           const nlohmann::json& body);

// POST /apply-template: {"messages": [...], "add_generation_prompt": bool, "tools": [...]}
// (tools as chat completions take them, given to the template) ->
// {"prompt": text} (Engine::RenderChat).
absl::StatusOr<std::string> ApplyTemplateBody(const engine::Engine& engine,
                                              const nlohmann::json& body);

}  // namespace pagoda::server::http
