#include "bench/bench_app.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/arrival_schedule.h"
#include "bench/dataset.h"
#include "bench/load_runner.h"
#include "bench/metrics.h"
#include "bench/report.h"
#include "client/generation_client.h"

namespace pagoda::bench {
namespace {

absl::Status Invalid(const std::string& flag, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", why));
}

// The server's model; retries a few times so a daemon still starting up is waited for.
absl::StatusOr<v1::ModelInfo> FetchModelInfo(v1::Generation::Stub* stub,
                                             const BenchConfig& config) {
  constexpr int kAttempts = 4;
  grpc::Status status;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    grpc::ClientContext context;
    if (!config.api_key.empty()) context.AddMetadata("authorization", "Bearer " + config.api_key);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ModelInfo info;
    status = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    if (status.ok()) return info;
    const bool transient = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!transient) break;
    if (attempt < kAttempts) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return absl::UnavailableError(absl::StrCat("GetModelInfo on ", config.server,
                                             " failed: ", StatusCodeName(status.error_code()), ": ",
                                             status.error_message()));
}

// `count` requests from the configured dataset; the same seed gives the same prompts.
absl::StatusOr<std::vector<BenchRequest>> BuildDataset(const BenchConfig& c, int count,
                                                       int vocab_size) {
  std::mt19937_64 rng(c.seed);
  if (c.dataset == "random") {
    return MakeRandomDataset({.num_prompts = count,
                              .input_len = c.input_len,
                              .output_len = c.output_len,
                              .range_ratio = c.range_ratio,
                              .prefix_len = c.prefix_len,
                              .vocab_size = vocab_size},
                             rng);
  }
  if (c.dataset == "shared-prefix") {
    return MakeSharedPrefixDataset({.num_prompts = count,
                                    .num_groups = c.num_groups,
                                    .prefix_len = c.prefix_len,
                                    .suffix_len = c.suffix_len,
                                    .output_len = c.output_len,
                                    .vocab_size = vocab_size},
                                   rng);
  }
  return LoadJsonlDataset(c.dataset_path, count, c.output_len);
}

v1::GenerateRequest ToGenerateRequest(const BenchRequest& r, const BenchConfig& c) {
  v1::GenerateRequest request;
  if (r.prompt_token_ids.empty()) {
    request.set_prompt(r.prompt);
  } else {
    request.mutable_prompt_token_ids()->Add(r.prompt_token_ids.begin(), r.prompt_token_ids.end());
  }
  if (r.max_tokens > 0) request.set_max_tokens(r.max_tokens);
  request.set_temperature(c.temperature);
  request.set_ignore_eos(c.ignore_eos);
  request.set_parse_special(c.parse_special);
  return request;
}

// Warns about prompts that cannot fit the model's context: the server will reject them.
void WarnAboutLength(const std::vector<BenchRequest>& dataset, int context_length) {
  int too_long = 0;
  for (const BenchRequest& r : dataset) {
    if (static_cast<int>(r.prompt_token_ids.size()) + r.max_tokens > context_length) ++too_long;
  }
  if (too_long > 0) {
    absl::FPrintF(stderr,
                  "pagoda-bench: warning: %d requests need more than the model's %d-token "
                  "context; expect them to fail\n",
                  too_long, context_length);
  }
}

std::string LocalDate() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return buf;
}

LoadRun Send(v1::Generation::Stub* stub, const std::vector<v1::GenerateRequest>& requests,
             const LoadOptions& options, const BenchConfig& config, const std::string& label) {
  std::unique_ptr<ProgressReporter> progress;
  if (config.progress) {
    progress = std::make_unique<ProgressReporter>(stderr, isatty(fileno(stderr)) == 1, label,
                                                  static_cast<int>(requests.size()));
    progress->Start();
  }
  LoadRun run = RunLoad(stub, requests, options, progress.get());
  if (progress) progress->Stop();
  return run;
}

int WriteJson(const nlohmann::json& j, const std::string& path) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out.good()) {
    absl::FPrintF(stderr, "pagoda-bench: cannot write --json-out %s\n", path);
    return 1;
  }
  return 0;
}

}  // namespace

absl::Status ValidateConfig(const BenchConfig& c) {
  if (c.server.empty()) return Invalid("server", "is required (host:port)");
  if (c.concurrency < 0) return Invalid("concurrency", "must be >= 0 (0 = unlimited)");
  if (!(c.request_rate > 0)) return Invalid("request-rate", "must be > 0 (inf = all at once)");
  if (!(c.burstiness > 0) || !std::isfinite(c.burstiness)) {
    return Invalid("burstiness", "must be > 0");
  }
  if (c.num_prompts < 1) return Invalid("num-prompts", "must be >= 1");
  if (c.warmup < 0) return Invalid("warmup", "must be >= 0");
  if (!(c.duration_s >= 0)) return Invalid("duration", "must be >= 0 (0 = no limit)");
  if (!(c.request_timeout_s >= 0)) return Invalid("request-timeout", "must be >= 0");
  if (c.dataset != "random" && c.dataset != "file" && c.dataset != "shared-prefix") {
    return Invalid("dataset", "must be random, file or shared-prefix");
  }
  if (c.dataset == "file" && c.dataset_path.empty()) {
    return Invalid("dataset-path", "is required with --dataset=file");
  }
  if (c.input_len < 1) return Invalid("input-len", "must be >= 1");
  if (c.output_len < 1) return Invalid("output-len", "must be >= 1");
  if (!(c.range_ratio >= 0 && c.range_ratio < 1))
    return Invalid("range-ratio", "must be in [0, 1)");
  if (c.prefix_len < 0) return Invalid("prefix-len", "must be >= 0");
  if (c.num_groups < 1) return Invalid("num-groups", "must be >= 1");
  if (c.suffix_len < 0) return Invalid("suffix-len", "must be >= 0");
  if (c.dataset == "shared-prefix" && c.prefix_len + c.suffix_len < 1) {
    return Invalid("prefix-len", "plus --suffix-len must be >= 1");
  }
  if (!(c.temperature >= 0)) return Invalid("temperature", "must be >= 0");
  return ParseGoodput(c.goodput).status();
}

int RunBench(const BenchConfig& config) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) {
    absl::FPrintF(stderr, "pagoda-bench: %s\n", s.message());
    return 2;
  }
  const GoodputSlo slo = *ParseGoodput(config.goodput);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = client::MakeChannel(
      {.address = config.server, .api_key = config.api_key, .tls_ca = config.tls_ca});
  if (!channel.ok()) {
    absl::FPrintF(stderr, "pagoda-bench: %s\n", channel.status().message());
    return 2;
  }
  std::unique_ptr<v1::Generation::Stub> stub = v1::Generation::NewStub(*channel);
  absl::StatusOr<v1::ModelInfo> info = FetchModelInfo(stub.get(), config);
  if (!info.ok()) {
    absl::FPrintF(stderr, "pagoda-bench: %s\n", info.status().message());
    return 1;
  }
  if (config.dataset != "file" && info->vocab_size() <= kFirstRandomTokenId) {
    absl::FPrintF(stderr, "pagoda-bench: the model's vocabulary (%d) is too small\n",
                  info->vocab_size());
    return 1;
  }
  absl::StatusOr<std::vector<BenchRequest>> dataset =
      BuildDataset(config, config.num_prompts + config.warmup, info->vocab_size());
  if (!dataset.ok()) {
    absl::FPrintF(stderr, "pagoda-bench: %s\n", dataset.status().message());
    return 2;
  }
  WarnAboutLength(*dataset, info->context_length());
  // The first num_prompts are measured; the rest, drawn after them, warm the server up.
  std::vector<v1::GenerateRequest> measured, warmup;
  for (size_t i = 0; i < dataset->size(); ++i) {
    auto& into = static_cast<int>(i) < config.num_prompts ? measured : warmup;
    into.push_back(ToGenerateRequest((*dataset)[i], config));
  }
  absl::FPrintF(stderr,
                "pagoda-bench: %s serves %s (%s); %d requests, dataset %s, rate %s req/s, "
                "concurrency %s\n",
                config.server, info->model(), info->backend(), config.num_prompts, config.dataset,
                std::isfinite(config.request_rate) ? absl::StrCat(config.request_rate) : "inf",
                config.concurrency > 0 ? absl::StrCat(config.concurrency) : "unlimited");

  LoadOptions options;
  options.concurrency = config.concurrency;
  options.call = {.api_key = config.api_key, .request_timeout_s = config.request_timeout_s};
  if (!warmup.empty()) Send(stub.get(), warmup, options, config, "warmup");

  if (std::isfinite(config.request_rate)) {
    std::mt19937_64 schedule_rng(config.seed + 1);
    options.send_offsets =
        GammaArrivalTimes(config.num_prompts, config.request_rate, config.burstiness, schedule_rng);
  }
  options.duration_s = config.duration_s;
  const LoadRun run = Send(stub.get(), measured, options, config, "bench");

  const BenchmarkResult result =
      ComputeResult(run.records, std::max(run.end_time - run.start_time, 1e-9), slo);
  const RunInfo run_info = {.date = LocalDate(),
                            .server = config.server,
                            .model = info->model(),
                            .dataset = config.dataset,
                            .num_prompts = config.num_prompts,
                            .request_rate = config.request_rate,
                            .burstiness = config.burstiness,
                            .max_concurrency = config.concurrency,
                            .warmup = config.warmup,
                            .peak_in_flight = run.peak_in_flight};
  PrintReport(result, run_info, stdout);
  std::fflush(stdout);
  if (config.json_out.empty()) return 0;
  return WriteJson(ResultToJson(result, run_info), config.json_out);
}

}  // namespace pagoda::bench
