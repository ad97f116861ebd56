// The benchmark's report: vLLM's table layout on stdout and its JSON key names on disk.
#pragma once

#include <cstdio>
#include <string>

#include "bench/metrics.h"
#include "nlohmann/json.hpp"

namespace pagoda::bench {

// How the run was set up, echoed in the report.
struct RunInfo {
  std::string date;  // local time, "20250101-120000" as vLLM's file names
  std::string server;
  std::string model;
  std::string dataset;  // random, file or shared-prefix
  int num_prompts = 0;
  double request_rate = 0;  // req/s; infinity = all at once
  double burstiness = 1;
  int max_concurrency = 0;  // 0 = unlimited
  int warmup = 0;
  int peak_in_flight = 0;  // most streams open at once, measured exactly
};

// The human-readable table.
void PrintReport(const BenchmarkResult& result, const RunInfo& info, std::FILE* out);

// The result as JSON with vLLM benchmark_serving's key names (latencies in ms, per-request
// arrays in seconds), plus pagoda's extras: failed-by-code "errors", "e2els",
// "request_send_rate", "peak_in_flight_requests".
nlohmann::json ResultToJson(const BenchmarkResult& result, const RunInfo& info);

}  // namespace pagoda::bench
