// pagoda-bench: a load-test client for a pagoda daemon, with vLLM benchmark_serving's
// metrics. `pagoda-bench --server HOST:PORT [flags]`; see docs/BENCH.md.
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "bench/bench_app.h"
#include "bench/bench_args.h"

ABSL_FLAG(std::string, server, "",
          "The server's address, host:port (required): gRPC, or HTTP with --backend openai.");
ABSL_FLAG(std::string, backend, "grpc",
          "grpc (pagoda's Generate stream) or openai (streamed POST /v1/completions on any "
          "OpenAI-compatible server: pagoda's --http-port, llama.cpp's llama-server, vLLM).");
ABSL_FLAG(std::string, model, "",
          "openai: the requests' \"model\"; empty = the first model /v1/models lists.");
ABSL_FLAG(int, vocab_size, 0,
          "openai: the vocabulary size for random token ids when /v1/models does not say it "
          "(llama.cpp and pagoda report meta.n_vocab).");
ABSL_FLAG(int, context_length, 0,
          "openai: the context length for the too-long warning when /v1/models does not say "
          "it.");
ABSL_FLAG(std::string, api_key, "", "Sent as 'authorization: Bearer <key>'.");
ABSL_FLAG(std::string, tls_ca, "", "PEM file of the CA to trust; empty = plaintext.");
ABSL_FLAG(int, concurrency, 0,
          "Most requests in flight at once (closed loop when --request-rate is inf); "
          "0 = unlimited.");
ABSL_FLAG(double, request_rate, std::numeric_limits<double>::infinity(),
          "Open loop: requests per second, gamma-distributed gaps; inf = all at once.");
ABSL_FLAG(double, burstiness, 1.0,
          "Shape of the gamma distribution of gaps: 1 = Poisson, < 1 burstier, > 1 steadier.");
ABSL_FLAG(int, num_prompts, 1000, "Requests to measure.");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the dataset and the arrival schedule.");
ABSL_FLAG(int, warmup, 0, "Requests sent first and not counted.");
ABSL_FLAG(double, duration, 0,
          "Send no new request after this many seconds (in-flight ones finish); 0 = no limit.");
ABSL_FLAG(double, request_timeout, 0,
          "Per-request deadline in seconds (DEADLINE_EXCEEDED counts as failed); 0 = none.");
ABSL_FLAG(std::string, dataset, "random", "random, file or shared-prefix.");
ABSL_FLAG(std::string, dataset_path, "",
          "--dataset=file: JSONL of {\"prompt\": str, \"max_tokens\": int} lines.");
ABSL_FLAG(int, input_len, 1024, "random: prompt tokens after the shared prefix.");
ABSL_FLAG(int, output_len, 128,
          "max_tokens of each request (random, shared-prefix; file lines without one).");
ABSL_FLAG(double, range_ratio, 0.0,
          "random: lengths uniform in [len * (1 - r), len * (1 + r)], r in [0, 1).");
ABSL_FLAG(int, prefix_len, 0,
          "random: random tokens every prompt starts with; shared-prefix: per-group prefix.");
ABSL_FLAG(int, num_groups, 4, "shared-prefix: number of distinct prefixes.");
ABSL_FLAG(int, suffix_len, 128, "shared-prefix: each request's own tokens after its prefix.");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating after EOS so output lengths are fixed.");
ABSL_FLAG(bool, parse_special, true,
          "Prompt text that spells a special token becomes that token (the request's "
          "parse_special); false = plain text.");
ABSL_FLAG(float, temperature, 0.0f, "Sampling temperature; 0 = greedy.");
ABSL_FLAG(std::vector<std::string>, goodput, {},
          "SLOs in ms, e.g. --goodput ttft:500 tpot:50 e2el:2000; reports the requests "
          "meeting all of them.");
ABSL_FLAG(std::string, json_out, "", "Write the result as JSON (vLLM's key names) here.");
ABSL_FLAG(bool, progress, true, "Show a progress line on stderr.");
// Repeatable: main() collects every occurrence before absl parses the rest, so this
// definition only documents it in --help.
ABSL_FLAG(std::string, tenant, "",
          "Repeatable: one tenant of a multi-tenant run, "
          "name=NAME[,key=KEY][,weight=W][,concurrency=N|,rate=R][,num-prompts=N]; unset "
          "fields take --api-key, --concurrency, --request-rate, --num-prompts. Each tenant "
          "sends its own requests with its key; the report adds per-tenant rows and Jain's "
          "fairness index (docs/BENCH.md).");

namespace {

pagoda::bench::BenchConfig ConfigFromFlags() {
  pagoda::bench::BenchConfig c;
  c.server = absl::GetFlag(FLAGS_server);
  c.backend = absl::GetFlag(FLAGS_backend);
  c.model = absl::GetFlag(FLAGS_model);
  c.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  c.context_length = absl::GetFlag(FLAGS_context_length);
  c.api_key = absl::GetFlag(FLAGS_api_key);
  c.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  c.concurrency = absl::GetFlag(FLAGS_concurrency);
  c.request_rate = absl::GetFlag(FLAGS_request_rate);
  c.burstiness = absl::GetFlag(FLAGS_burstiness);
  c.num_prompts = absl::GetFlag(FLAGS_num_prompts);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.warmup = absl::GetFlag(FLAGS_warmup);
  c.duration_s = absl::GetFlag(FLAGS_duration);
  c.request_timeout_s = absl::GetFlag(FLAGS_request_timeout);
  c.dataset = absl::GetFlag(FLAGS_dataset);
  c.dataset_path = absl::GetFlag(FLAGS_dataset_path);
  c.input_len = absl::GetFlag(FLAGS_input_len);
  c.output_len = absl::GetFlag(FLAGS_output_len);
  c.range_ratio = absl::GetFlag(FLAGS_range_ratio);
  c.prefix_len = absl::GetFlag(FLAGS_prefix_len);
  c.num_groups = absl::GetFlag(FLAGS_num_groups);
  c.suffix_len = absl::GetFlag(FLAGS_suffix_len);
  c.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  c.parse_special = absl::GetFlag(FLAGS_parse_special);
  c.temperature = absl::GetFlag(FLAGS_temperature);
  c.goodput = absl::GetFlag(FLAGS_goodput);
  c.json_out = absl::GetFlag(FLAGS_json_out);
  c.progress = absl::GetFlag(FLAGS_progress);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  pagoda::bench::SetFlagsUsage(
      "bench/bench_main",
      "load-tests a pagoda daemon: pagoda-bench --server HOST:PORT [--concurrency N | "
      "--request-rate R] [flags]. Flags may be spelled with dashes or underscores.");
  std::vector<std::string> args = pagoda::bench::PrepareArgs(argc, argv);
  const std::vector<std::string> tenants = pagoda::bench::TakeRepeatedFlag("tenant", &args);
  if (!pagoda::bench::ParseFlags("pagoda-bench", args)) return 2;
  pagoda::bench::BenchConfig config = ConfigFromFlags();
  config.tenants = tenants;
  return pagoda::bench::RunBench(config);
}
