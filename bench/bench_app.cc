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
#include "bench/fairness.h"
#include "bench/load_runner.h"
#include "bench/metrics.h"
#include "bench/openai_call.h"
#include "bench/report.h"
#include "bench/stream_call.h"
#include "bench/tenant_report.h"
#include "bench/tenant_spec.h"
#include "client/generation_client.h"

namespace pagoda::bench {
namespace {

absl::Status Invalid(const std::string& flag, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", why));
}

// The server's model; retries a few times so a daemon still starting up is waited for.
absl::StatusOr<v1::ModelInfo> FetchModelInfo(v1::Generation::Stub* stub, const BenchConfig& config,
                                             const std::string& api_key) {
  constexpr int kAttempts = 4;
  grpc::Status status;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    grpc::ClientContext context;
    AddApiKey(&context, api_key);
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
absl::StatusOr<std::vector<BenchRequest>> BuildDataset(const BenchConfig& c, uint64_t seed,
                                                       int count, int vocab_size) {
  std::mt19937_64 rng(seed);
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

std::unique_ptr<ProgressReporter> StartProgress(const BenchConfig& config, const std::string& label,
                                                int total) {
  if (!config.progress) return nullptr;
  auto progress =
      std::make_unique<ProgressReporter>(stderr, isatty(fileno(stderr)) == 1, label, total);
  progress->Start();
  return progress;
}

// The run's tenants: the --tenant specifications (unset fields from the flags), or one
// unnamed tenant made of the flags.
absl::StatusOr<std::vector<TenantSpec>> Tenants(const BenchConfig& c) {
  const TenantSpec defaults = {.name = "",
                               .api_key = c.api_key,
                               .weight = 1,
                               .concurrency = c.concurrency,
                               .request_rate = c.request_rate,
                               .num_prompts = c.num_prompts};
  if (c.tenants.empty()) return std::vector<TenantSpec>{defaults};
  std::vector<TenantSpec> tenants;
  for (const std::string& spec : c.tenants) {
    absl::StatusOr<TenantSpec> t = ParseTenantSpec(spec, defaults);
    if (!t.ok()) return t.status();
    for (const TenantSpec& other : tenants) {
      if (other.name == t->name) {
        return absl::InvalidArgumentError(absl::StrCat("--tenant name ", t->name, " is repeated"));
      }
    }
    tenants.push_back(*std::move(t));
  }
  return tenants;
}

// One tenant's share of the run: its requests, how they are sent, what they saw.
struct TenantLoad {
  TenantSpec spec;
  std::vector<v1::GenerateRequest> requests;
  std::vector<v1::GenerateRequest> warmup;  // first tenant only
  LoadOptions options;
  LoadRun run;
};

// Sends every tenant's requests at once (a thread each) and waits for all of them.
void SendAll(const StartCallFn& start, const BenchConfig& config, std::vector<TenantLoad>* loads) {
  int total = 0;
  for (const TenantLoad& l : *loads) total += static_cast<int>(l.requests.size());
  std::unique_ptr<ProgressReporter> progress = StartProgress(config, "bench", total);
  std::vector<std::thread> threads;
  for (TenantLoad& l : *loads) {
    threads.emplace_back(
        [&start, &l, p = progress.get()] { l.run = RunLoad(start, l.requests, l.options, p); });
  }
  for (std::thread& t : threads) t.join();
  if (progress) progress->Stop();
}

// Builds each tenant's requests (tenant i's dataset is seeded seed + i) and send options;
// the warmup requests are drawn after the first tenant's measured ones.
absl::StatusOr<std::vector<TenantLoad>> PlanLoads(const BenchConfig& config,
                                                  const std::vector<TenantSpec>& tenants,
                                                  const v1::ModelInfo& info) {
  std::vector<TenantLoad> loads;
  for (size_t i = 0; i < tenants.size(); ++i) {
    TenantLoad l{.spec = tenants[i]};
    const int warmup = i == 0 ? config.warmup : 0;
    absl::StatusOr<std::vector<BenchRequest>> dataset =
        BuildDataset(config, config.seed + i, l.spec.num_prompts + warmup, info.vocab_size());
    if (!dataset.ok()) return dataset.status();
    WarnAboutLength(*dataset, info.context_length());
    for (size_t k = 0; k < dataset->size(); ++k) {
      auto& into = static_cast<int>(k) < l.spec.num_prompts ? l.requests : l.warmup;
      into.push_back(ToGenerateRequest((*dataset)[k], config));
    }
    l.options.concurrency = l.spec.concurrency;
    l.options.duration_s = config.duration_s;
    l.options.call = {.api_key = l.spec.api_key, .request_timeout_s = config.request_timeout_s};
    if (std::isfinite(l.spec.request_rate)) {
      std::mt19937_64 schedule_rng(config.seed + 1 + i);
      l.options.send_offsets = GammaArrivalTimes(l.spec.num_prompts, l.spec.request_rate,
                                                 config.burstiness, schedule_rng);
    }
    loads.push_back(std::move(l));
  }
  return loads;
}

// Sends the first tenant's warmup requests, not measured.
void WarmUp(const StartCallFn& start, const BenchConfig& config, const TenantLoad& first) {
  if (first.warmup.empty()) return;
  LoadOptions options;
  options.concurrency = first.options.concurrency;
  options.call = first.options.call;
  std::unique_ptr<ProgressReporter> progress =
      StartProgress(config, "warmup", static_cast<int>(first.warmup.size()));
  RunLoad(start, first.warmup, options, progress.get());
  if (progress) progress->Stop();
}

// Per-tenant results and the fairness over the run's tenants.
MultiTenantResult ComputeTenantResults(const std::vector<TenantLoad>& loads, double start,
                                       const GoodputSlo& slo) {
  MultiTenantResult m;
  std::vector<TenantRecords> series;
  for (const TenantLoad& l : loads) {
    const double duration = std::max(l.run.end_time - l.run.start_time, 1e-9);
    m.tenants.push_back({.name = l.spec.name,
                         .weight = l.spec.weight,
                         .result = ComputeResult(l.run.records, duration, slo)});
    series.push_back({.records = &l.run.records, .weight = l.spec.weight});
  }
  m.fairness = ComputeFairness(series, start);
  return m;
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

// Where the requests go: a way to start one stream, and the served model's facts.
struct Target {
  std::unique_ptr<v1::Generation::Stub> stub;  // grpc backend
  OpenAiServer openai;                         // openai backend
  StartCallFn start;
  v1::ModelInfo info;
};

// Connects to the configured backend and learns its model. InvalidArgument for a bad
// address or a missing model fact, Unavailable when the server cannot be reached.
absl::Status Connect(const BenchConfig& config, const std::string& api_key, Target* target) {
  if (config.backend == "openai") {
    absl::StatusOr<OpenAiServer> server = ParseOpenAiServer(config.server);
    if (!server.ok()) return server.status();
    target->openai = *std::move(server);
    absl::StatusOr<v1::ModelInfo> info = FetchOpenAiModels(target->openai, api_key);
    if (!info.ok()) return info.status();
    target->info = *std::move(info);
    if (config.model.empty()) {
      target->openai.model = target->info.model();
    } else {
      target->openai.model = config.model;
      target->info.set_model(config.model);
    }
    if (config.vocab_size > 0) target->info.set_vocab_size(config.vocab_size);
    if (config.context_length > 0) target->info.set_context_length(config.context_length);
    if (config.dataset != "file" && target->info.vocab_size() == 0) {
      return Invalid("vocab-size", "is required: the server's /v1/models does not say it");
    }
    if (target->info.context_length() == 0) target->info.set_context_length(1 << 30);
    target->start = [server = target->openai](const CallOptions& options,
                                              const v1::GenerateRequest& request,
                                              RequestRecord* record, std::function<void()> done) {
      StartOpenAiCall(server, options, request, record, std::move(done));
    };
    return absl::OkStatus();
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      client::MakeChannel({.address = config.server, .tls_ca = config.tls_ca});
  if (!channel.ok()) return absl::InvalidArgumentError(channel.status().message());
  target->stub = v1::Generation::NewStub(*channel);
  absl::StatusOr<v1::ModelInfo> info = FetchModelInfo(target->stub.get(), config, api_key);
  if (!info.ok()) return info.status();
  target->info = *std::move(info);
  target->start = [stub = target->stub.get()](const CallOptions& options,
                                              const v1::GenerateRequest& request,
                                              RequestRecord* record, std::function<void()> done) {
    StartStreamCall(stub, options, request, record, std::move(done));
  };
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateConfig(const BenchConfig& c) {
  if (c.server.empty()) return Invalid("server", "is required (host:port)");
  if (c.backend != "grpc" && c.backend != "openai")
    return Invalid("backend", "must be grpc or openai");
  if (c.backend == "openai" && !c.tls_ca.empty()) {
    return Invalid("tls-ca", "is for --backend grpc (the openai backend speaks plain HTTP)");
  }
  if (c.vocab_size < 0) return Invalid("vocab-size", "must be >= 0");
  if (c.context_length < 0) return Invalid("context-length", "must be >= 0");
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
  if (absl::Status s = Tenants(c).status(); !s.ok()) return s;
  return ParseGoodput(c.goodput).status();
}

int RunBench(const BenchConfig& config) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) {
    absl::FPrintF(stderr, "pagoda-bench: %s\n", s.message());
    return 2;
  }
  const GoodputSlo slo = *ParseGoodput(config.goodput);
  const std::vector<TenantSpec> tenants = *Tenants(config);
  Target target;
  if (absl::Status s = Connect(config, tenants[0].api_key, &target); !s.ok()) {
    absl::FPrintF(stderr, "pagoda-bench: %s\n", s.message());
    return absl::IsInvalidArgument(s) ? 2 : 1;
  }
  const v1::ModelInfo* info = &target.info;
  if (config.dataset != "file" && info->vocab_size() <= kFirstRandomTokenId) {
    absl::FPrintF(stderr, "pagoda-bench: the model's vocabulary (%d) is too small\n",
                  info->vocab_size());
    return 1;
  }
  absl::StatusOr<std::vector<TenantLoad>> loads = PlanLoads(config, tenants, *info);
  if (!loads.ok()) {
    absl::FPrintF(stderr, "pagoda-bench: %s\n", loads.status().message());
    return 2;
  }
  int num_prompts = 0;
  for (const TenantSpec& t : tenants) num_prompts += t.num_prompts;
  absl::FPrintF(stderr, "pagoda-bench: %s serves %s (%s); %d requests, dataset %s, %d tenant(s)\n",
                config.server, info->model(), info->backend(), num_prompts, config.dataset,
                tenants.size());
  WarmUp(target.start, config, loads->front());
  SendAll(target.start, config, &*loads);

  double start = loads->front().run.start_time, end = loads->front().run.end_time;
  int peak_in_flight = 0;
  std::vector<RequestRecord> records;
  for (const TenantLoad& l : *loads) {
    start = std::min(start, l.run.start_time);
    end = std::max(end, l.run.end_time);
    peak_in_flight += l.run.peak_in_flight;  // exact for one tenant, an upper bound else
    records.insert(records.end(), l.run.records.begin(), l.run.records.end());
  }
  const BenchmarkResult result = ComputeResult(records, std::max(end - start, 1e-9), slo);
  const RunInfo run_info = {.date = LocalDate(),
                            .server = config.server,
                            .model = info->model(),
                            .dataset = config.dataset,
                            .num_prompts = num_prompts,
                            .request_rate = config.request_rate,
                            .burstiness = config.burstiness,
                            .max_concurrency = config.concurrency,
                            .warmup = config.warmup,
                            .peak_in_flight = peak_in_flight};
  PrintReport(result, run_info, stdout);
  nlohmann::json json = ResultToJson(result, run_info);
  if (!config.tenants.empty()) {
    const MultiTenantResult per_tenant = ComputeTenantResults(*loads, start, slo);
    PrintTenantReport(per_tenant, stdout);
    AddTenantsToJson(per_tenant, &json);
  }
  std::fflush(stdout);
  if (config.json_out.empty()) return 0;
  return WriteJson(json, config.json_out);
}

}  // namespace pagoda::bench
