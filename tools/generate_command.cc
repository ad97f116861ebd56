// `pagoda generate`: offline generation in-process (one prompt, or a file of prompts
// submitted together), or streaming from a running daemon with --server.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "engine/collecting_sink.h"
#include "engine/engine.h"
#include "model/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tools/client_generate.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"
#include "tools/sampling_flags.h"

ABSL_FLAG(std::string, prompt, "", "prompt text (BOS is added as the model's metadata says)");
ABSL_FLAG(std::string, prompts_file, "",
          "file with one prompt per line: all are submitted at once, one JSON line printed per "
          "prompt in input order");
ABSL_FLAG(bool, json, false,
          "print one JSON object {prompt_token_ids, output_token_ids, text, ...} instead of "
          "streaming text");
ABSL_FLAG(std::string, server, "", "stream from a running daemon at this address (host:port)");

namespace pagoda::tools {
namespace {

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

int RunOffline(const std::vector<std::string>& prompts, bool json) {
  auto engine_or = StartEngineFromFlags();
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
    engine::GenerationRequest r = RequestFromFlags();
    jobs[i].prompt = tok.Encode(prompts[i], tok.add_bos());
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

}  // namespace

int RunGenerate(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "pagoda generate --prompt TEXT [--max_tokens N] [--temperature T] [--json] ...\n"
      "Generates a completion offline (in-process), or from a daemon with --server.");
  absl::ParseCommandLine(argc, argv);
  std::vector<std::string> prompts;
  const std::string file = absl::GetFlag(FLAGS_prompts_file);
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) {
      std::cerr << "pagoda generate: cannot read " << file << "\n";
      return 1;
    }
    for (std::string line; std::getline(in, line);) prompts.push_back(line);
  } else {
    prompts.push_back(absl::GetFlag(FLAGS_prompt));
  }
  const std::string server = absl::GetFlag(FLAGS_server);
  if (!server.empty()) return RunClientGenerate(server, prompts, absl::GetFlag(FLAGS_json));
  return RunOffline(prompts, absl::GetFlag(FLAGS_json) || !file.empty());
}

}  // namespace pagoda::tools
