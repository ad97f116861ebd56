#include "tools/client_generate.h"

#include <cstdio>
#include <iostream>

#include "client/generation_client.h"
#include "nlohmann/json.hpp"

namespace pagoda::tools {
namespace {

v1::GenerateRequest ToProto(const engine::GenerationRequest& r, const std::string& prompt) {
  v1::GenerateRequest p;
  p.set_prompt(prompt);
  if (r.max_tokens.has_value()) p.set_max_tokens(*r.max_tokens);
  const engine::SamplingParams& s = r.sampling;
  p.set_temperature(s.temperature);
  p.set_top_k(s.top_k);
  p.set_top_p(s.top_p);
  p.set_min_p(s.min_p);
  p.set_repetition_penalty(s.repetition_penalty);
  if (s.seed.has_value()) p.set_seed(*s.seed);
  if (s.logprobs.has_value()) p.set_logprobs(*s.logprobs);
  for (const std::string& stop : r.stop) p.add_stop(stop);
  p.set_ignore_eos(r.ignore_eos);
  p.set_parse_special(r.parse_special);
  return p;
}

}  // namespace

int RunClientGenerate(const client::ChannelOptions& options, const engine::GenerationRequest& base,
                      const std::vector<std::string>& prompts, bool json) {
  auto channel = client::MakeChannel(options);
  if (!channel.ok()) {
    std::cerr << "pagoda generate: " << channel.status().message() << "\n";
    return 1;
  }
  client::GenerationClient client(*channel, options.api_key);
  int rc = 0;
  for (const std::string& prompt : prompts) {
    std::vector<int32_t> tokens;
    std::string text, finish;
    int32_t prompt_tokens = 0, completion_tokens = 0;
    const grpc::Status status =
        client.Generate(ToProto(base, prompt), [&](const v1::GenerateResponse& r) {
          tokens.insert(tokens.end(), r.token_ids().begin(), r.token_ids().end());
          text += r.text();
          if (!json && !r.text().empty()) {
            std::fwrite(r.text().data(), 1, r.text().size(), stdout);
            std::fflush(stdout);
          }
          if (r.has_usage()) {
            prompt_tokens = r.usage().prompt_tokens();
            completion_tokens = r.usage().completion_tokens();
          }
          if (!r.finish_reason().empty()) finish = r.finish_reason();
        });
    if (!status.ok()) {
      rc = 1;
      std::cerr << "pagoda generate: " << status.error_message() << " (code "
                << static_cast<int>(status.error_code()) << ")\n";
    }
    if (json) {
      nlohmann::json j;
      j["output_token_ids"] = tokens;
      j["text"] = text;
      j["finish_reason"] = finish;
      j["usage"] = {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}};
      if (!status.ok()) j["error"] = status.error_message();
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << "\n";
    }
  }
  return rc;
}

}  // namespace pagoda::tools
