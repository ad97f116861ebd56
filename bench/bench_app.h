// pagoda-bench's run: connect, build the dataset, warm up, send, report.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pagoda::bench {

// Every setting of a run; the binary fills it from its flags (see bench_main.cc for each
// one's meaning).
struct BenchConfig {
  std::string server;
  std::string backend = "grpc";  // grpc (pagoda's Generate) or openai (POST /v1/completions)
  std::string model;             // openai: the request's "model"; empty = the first listed
  int vocab_size = 0;            // openai: overrides /v1/models' meta.n_vocab; 0 = the server's
  int context_length = 0;        // openai: overrides meta.n_ctx; 0 = the server's
  std::string api_key;
  std::string tls_ca;
  int concurrency = 0;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int num_prompts = 1000;
  uint64_t seed = 0;
  int warmup = 0;
  double duration_s = 0;
  double request_timeout_s = 0;
  std::string dataset = "random";
  std::string dataset_path;
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0;
  int prefix_len = 0;
  int num_groups = 4;
  int suffix_len = 128;
  bool ignore_eos = false;
  bool parse_special = true;
  float temperature = 0;
  std::vector<std::string> goodput;
  std::string json_out;
  bool progress = true;
  // --tenant specifications (ParseTenantSpec); empty = one tenant from the flags above.
  std::vector<std::string> tenants;
};

// InvalidArgument naming the first flag whose value cannot work.
absl::Status ValidateConfig(const BenchConfig& config);

// Runs the benchmark and prints the report; returns the exit code: 0 when the run
// completed (failed requests included), 2 for a bad setting, 1 when the server cannot
// be reached at the start or the JSON cannot be written.
int RunBench(const BenchConfig& config);

}  // namespace pagoda::bench
