// GET /v1/models and /v1/models/{id}: the one model this daemon serves, with `meta` as
// llama.cpp's server reports it (n_vocab, n_ctx), so load generators (pagoda-bench
// --backend openai) can draw random token ids and check lengths.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/engine.h"

namespace pagoda::server::http {

// The list (`id` empty) or the model `id` names; nullopt when `id` is not `model_name`.
std::optional<std::string> ModelsBody(const std::string& model_name, const engine::ModelInfo& info,
                                      int64_t created, std::string_view id);

}  // namespace pagoda::server::http
