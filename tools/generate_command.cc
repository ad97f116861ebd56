// `pagoda generate`: offline generation in-process (one prompt, or a file of prompts
// submitted together), or streaming from a running daemon with --server.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "engine/collecting_sink.h"
#include "engine/engine.h"
#include "model/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tools/client_generate.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"
#include "tools/sampling_flags.h"

namespace pagoda::tools {
namespace {

struct GenerateFlags {
  std::string prompt;
  std::string prompts_file;
  bool json = false;
  std::string server;
  std::string api_key;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  EngineFlags engine;
  SamplingFlags sampling;
};

nlohmann::json ToJson(const std::vector<int32_t>& prompt, const engine::CollectedOutput& out) {
  nlohmann::json j;
  j["prompt_token_ids"] = prompt;
  j["output_token_ids"] = out.token_ids;
  j["text"] = out.text;
  j["finish_reason"] = engine::FinishReasonName(out.finish_reason);
  j["usage"] = {{"prompt_tokens", out.usage.prompt_tokens},
                {"completion_tokens", out.usage.completion_tokens}};
  if (!out.logprobs.empty()) {
    nlohmann::json lps = nlohmann::json::array();
    for (const engine::TokenLogprob& lp : out.logprobs) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [id, l] : lp.top) top.push_back({id, l});
      lps.push_back({{"token_id", lp.token_id}, {"logprob", lp.logprob}, {"top", top}});
    }
    j["logprobs"] = lps;
  }
  if (!out.error.ok()) j["error"] = std::string(out.error.message());
  return j;
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int RunOffline(const GenerateFlags& flags, const std::vector<std::string>& prompts, bool json) {
  auto engine_or = StartEngineFromFlags(flags.engine);
  if (!engine_or.ok()) {
    std::cerr << "pagoda generate: " << engine_or.status().message() << "\n";
    return 1;
  }
  engine::Engine& engine = **engine_or;
  const model::Tokenizer& tok = engine.tokenizer();
  const bool stream = !json && prompts.size() == 1;
  struct Job {
    std::vector<int32_t> prompt;
    std::shared_ptr<engine::CollectingSink> sink;
    absl::Status submit_status;
  };
  std::vector<Job> jobs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::GenerationRequest r = RequestFromFlags(flags.sampling);
    jobs[i].prompt = tok.Encode(prompts[i], tok.add_bos(), r.parse_special);
    r.prompt_token_ids = jobs[i].prompt;
    jobs[i].sink = std::make_shared<engine::CollectingSink>(
        stream ? [](const engine::GenerationOutput& o) {
          std::fwrite(o.text.data(), 1, o.text.size(), stdout);
          std::fflush(stdout);
        } : std::function<void(const engine::GenerationOutput&)>());
    jobs[i].submit_status = engine.Submit(std::move(r), jobs[i].sink).status();
  }
  int rc = 0;
  for (Job& job : jobs) {
    engine::CollectedOutput out;
    if (job.submit_status.ok()) {
      out = job.sink->Wait();
    } else {
      out.finish_reason = engine::FinishReason::kError;
      out.error = job.submit_status;
    }
    if (!out.error.ok()) rc = 1;
    if (stream) {
      std::cout << "\n";
      if (!out.error.ok()) std::cerr << "pagoda generate: " << out.error.message() << "\n";
    } else {
      std::cout << Dump(ToJson(job.prompt, out)) << "\n";
    }
  }
  engine.Stop();
  return rc;
}

int RunGenerate(const GenerateFlags& flags) {
  std::vector<std::string> prompts;
  if (!flags.prompts_file.empty()) {
    std::ifstream in(flags.prompts_file);
    if (!in) {
      std::cerr << "pagoda generate: cannot read " << flags.prompts_file << "\n";
      return 1;
    }
    for (std::string line; std::getline(in, line);) prompts.push_back(line);
  } else {
    prompts.push_back(flags.prompt);
  }
  if (!flags.server.empty()) {
    return RunClientGenerate({.address = flags.server,
                              .api_key = flags.api_key,
                              .tls_ca = flags.tls_ca,
                              .tls_cert = flags.tls_cert,
                              .tls_key = flags.tls_key},
                             RequestFromFlags(flags.sampling), prompts, flags.json);
  }
  return RunOffline(flags, prompts, flags.json || !flags.prompts_file.empty());
}

}  // namespace

Command AddGenerateCommand(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generates completions offline (in-process), or from a daemon with --server.");
  cmd->add_option("--prompt", flags->prompt,
                  "prompt text (BOS is added as the model's metadata says)");
  cmd->add_option("--prompts-file", flags->prompts_file,
                  "file with one prompt per line: all are submitted at once, one JSON line "
                  "printed per prompt in input order");
  cmd->add_flag("--json", flags->json,
                "print one JSON object {prompt_token_ids, output_token_ids, text, ...} instead "
                "of streaming text");
  cmd->add_option("--server", flags->server,
                  "stream from a running daemon at this address (host:port); the engine flags "
                  "are then unused");
  cmd->add_option("--api-key", flags->api_key,
                  "with --server: API key sent as 'authorization: Bearer <key>'");
  cmd->add_option("--tls-ca", flags->tls_ca, "with --server: PEM CA to trust; connects over TLS");
  cmd->add_option("--tls-cert", flags->tls_cert,
                  "with --tls-ca: PEM client certificate for mutual TLS (with --tls-key)");
  cmd->add_option("--tls-key", flags->tls_key, "PEM private key of --tls-cert");
  AddSamplingFlags(cmd, &flags->sampling);
  AddEngineFlags(cmd, &flags->engine);
  return {cmd, [flags] { return RunGenerate(*flags); }};
}

}  // namespace pagoda::tools
