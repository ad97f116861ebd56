// From per-request records to the benchmark's numbers, as vLLM's benchmark_serving
// computes them (calculate_metrics), so the two tools' reports mean the same.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/request_record.h"
#include "bench/stats.h"

namespace pagoda::bench {

// Service-level objectives for goodput, in milliseconds; unset ones are not checked.
struct GoodputSlo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;

  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};

// Parses "ttft:500", "tpot:50", "e2el:2000" entries (each may also hold several, comma
// separated). InvalidArgument on an unknown metric, a repeated one, or a value that is not
// a non-negative number.
absl::StatusOr<GoodputSlo> ParseGoodput(const std::vector<std::string>& specs);

// One request's latencies, in seconds.
struct RequestMetrics {
  bool success = false;
  std::string status;    // gRPC code name
  double send_time = 0;  // steady-clock seconds
  double ttft = 0;       // send -> first token-carrying message; = e2el when none came
  double e2el = 0;       // send -> final status
  double tpot = 0;       // (e2el - ttft) / (output_len - 1); 0 when output_len <= 1
  // Gaps between consecutive token-carrying messages, each split evenly over the later
  // message's tokens (the first message's extra tokens add none).
  std::vector<double> itls;
  int input_len = 0;
  int cached_len = 0;       // the server's cached_tokens (prompt tokens from the prefix cache)
  int output_len = 0;       // the server's completion_tokens; 0 for a failed request
  int streamed_tokens = 0;  // tokens counted in the stream itself
};

// TTFT, ITL, TPOT and E2EL of one record.
RequestMetrics ComputeRequestMetrics(const RequestRecord& record);

struct BenchmarkResult {
  int completed = 0;
  int failed = 0;
  std::map<std::string, int> errors;                 // failed requests by status code name
  std::map<std::string, std::string> error_samples;  // first message seen for each code
  long long total_input = 0;                         // prompt tokens of completed requests
  long long total_output = 0;                        // completion tokens of completed requests
  long long total_cached = 0;  // prompt tokens of completed requests served from the prefix cache
  double prefix_cache_hit_rate = 0;  // total_cached / total_input (0 when no input)
  long long total_streamed = 0;
  double duration = 0;  // seconds
  double request_throughput = 0;
  double output_throughput = 0;
  double total_token_throughput = 0;
  std::optional<double> request_goodput;   // good requests per second, when SLOs are set
  std::optional<double> goodput_fraction;  // good / all requests, when SLOs are set
  double max_output_tokens_per_s = 0;      // max over 1-second buckets
  int max_concurrent_requests = 0;         // max over 1-second buckets (vLLM's definition)
  double request_send_rate = 0;            // (sent - 1) / (last send - first send)
  Summary ttft, tpot, itl, e2el;           // milliseconds
  std::vector<RequestMetrics> requests;    // in send order
};

// The whole run's numbers. `duration` is the measured wall time in seconds (> 0).
BenchmarkResult ComputeResult(const std::vector<RequestRecord>& records, double duration,
                              const GoodputSlo& slo);

}  // namespace pagoda::bench
