#include "server/http/models_route.h"

#include <nlohmann/json.hpp>

#include "server/http/openai_response.h"

namespace pagoda::server::http {

std::optional<std::string> ModelsBody(const std::string& model_name, const engine::ModelInfo& info,
                                      int64_t created, std::string_view id) {
  using nlohmann::json;
  const json model = {{"id", model_name},
                      {"object", "model"},
                      {"created", created},
                      {"owned_by", "pagoda"},
                      {"meta", {{"n_vocab", info.vocab_size}, {"n_ctx", info.context_length}}}};
  if (id.empty()) return Dump({{"object", "list"}, {"data", json::array({model})}});
  if (id != model_name) return std::nullopt;
  return Dump(model);
}

}  // namespace pagoda::server::http
