#include "bench/report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagoda::bench {
namespace {

constexpr int kWidth = 50;

std::string Centered(const std::string& title, char fill) {
  const int pad = std::max(0, kWidth - static_cast<int>(title.size()));
  return std::string(pad / 2, fill) + title + std::string(pad - pad / 2, fill);
}

void Row(std::FILE* out, const std::string& name, const std::string& value) {
  absl::FPrintF(out, "%-40s %-10s\n", name + ":", value);
}

std::string Num(double v) { return absl::StrFormat("%.2f", v); }

void LatencySection(std::FILE* out, const std::string& title, const std::string& name,
                    const Summary& s) {
  absl::FPrintF(out, "%s\n", Centered(title, '-'));
  Row(out, absl::StrFormat("Mean %s (ms)", name), Num(s.mean));
  Row(out, absl::StrFormat("Median %s (ms)", name), Num(s.median));
  Row(out, absl::StrFormat("Std %s (ms)", name), Num(s.std));
  Row(out, absl::StrFormat("P50 %s (ms)", name), Num(s.p50));
  Row(out, absl::StrFormat("P90 %s (ms)", name), Num(s.p90));
  Row(out, absl::StrFormat("P95 %s (ms)", name), Num(s.p95));
  Row(out, absl::StrFormat("P99 %s (ms)", name), Num(s.p99));
}

void AddSummary(nlohmann::json& j, const std::string& metric, const Summary& s) {
  j["mean_" + metric + "_ms"] = s.mean;
  j["median_" + metric + "_ms"] = s.median;
  j["std_" + metric + "_ms"] = s.std;
  j["p50_" + metric + "_ms"] = s.p50;
  j["p90_" + metric + "_ms"] = s.p90;
  j["p95_" + metric + "_ms"] = s.p95;
  j["p99_" + metric + "_ms"] = s.p99;
}

void AddPerRequest(nlohmann::json& j, const BenchmarkResult& result) {
  nlohmann::json input_lens = nlohmann::json::array(), output_lens = nlohmann::json::array(),
                 ttfts = nlohmann::json::array(), itls = nlohmann::json::array(),
                 e2els = nlohmann::json::array(), send_times = nlohmann::json::array(),
                 statuses = nlohmann::json::array();
  const double first_send = result.requests.empty() ? 0 : result.requests.front().send_time;
  for (const RequestMetrics& r : result.requests) {
    input_lens.push_back(r.input_len);
    output_lens.push_back(r.output_len);
    ttfts.push_back(r.ttft);
    itls.push_back(r.itls);
    e2els.push_back(r.e2el);
    send_times.push_back(r.send_time - first_send);
    statuses.push_back(r.status);
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["e2els"] = std::move(e2els);
  j["send_times"] = std::move(send_times);
  j["statuses"] = std::move(statuses);
}

}  // namespace

void PrintReport(const BenchmarkResult& result, const RunInfo& info, std::FILE* out) {
  absl::FPrintF(out, "%s\n", Centered(" Serving Benchmark Result ", '='));
  Row(out, "Successful requests", absl::StrCat(result.completed));
  Row(out, "Failed requests", absl::StrCat(result.failed));
  for (const auto& [code, count] : result.errors) {
    Row(out, "  " + code, absl::StrCat(count));
    const std::string& sample = result.error_samples.at(code);
    if (!sample.empty()) absl::FPrintF(out, "    (first: %s)\n", sample);
  }
  Row(out, "Maximum request concurrency",
      info.max_concurrency > 0 ? absl::StrCat(info.max_concurrency) : "unlimited");
  Row(out, "Request rate configured (RPS)",
      std::isfinite(info.request_rate) ? Num(info.request_rate) : "inf");
  Row(out, "Request send rate (RPS)", Num(result.request_send_rate));
  Row(out, "Benchmark duration (s)", Num(result.duration));
  Row(out, "Total input tokens", absl::StrCat(result.total_input));
  Row(out, "Total generated tokens", absl::StrCat(result.total_output));
  Row(out, "Prefix cache hit rate (%)", Num(result.prefix_cache_hit_rate * 100));
  Row(out, "Request throughput (req/s)", Num(result.request_throughput));
  if (result.request_goodput) {
    Row(out, "Request goodput (req/s)", Num(*result.request_goodput));
    Row(out, "Requests meeting the SLOs (%)", Num(*result.goodput_fraction * 100));
  }
  Row(out, "Output token throughput (tok/s)", Num(result.output_throughput));
  Row(out, "Peak output token throughput (tok/s)", Num(result.max_output_tokens_per_s));
  Row(out, "Peak concurrent requests (1-s buckets)", absl::StrCat(result.max_concurrent_requests));
  Row(out, "Peak in-flight requests", absl::StrCat(info.peak_in_flight));
  Row(out, "Total Token throughput (tok/s)", Num(result.total_token_throughput));
  LatencySection(out, "Time to First Token", "TTFT", result.ttft);
  LatencySection(out, "Time per Output Token (excl. 1st token)", "TPOT", result.tpot);
  LatencySection(out, "Inter-token Latency", "ITL", result.itl);
  LatencySection(out, "End-to-end Latency", "E2EL", result.e2el);
  absl::FPrintF(out, "%s\n", std::string(kWidth, '='));
}

nlohmann::json ResultToJson(const BenchmarkResult& result, const RunInfo& info) {
  nlohmann::json j;
  j["date"] = info.date;
  j["backend"] = "pagoda";
  j["server"] = info.server;
  j["model_id"] = info.model;
  j["dataset_name"] = info.dataset;
  j["num_prompts"] = info.num_prompts;
  j["request_rate"] =
      std::isfinite(info.request_rate) ? nlohmann::json(info.request_rate) : nlohmann::json("inf");
  j["burstiness"] = info.burstiness;
  j["max_concurrency"] =
      info.max_concurrency > 0 ? nlohmann::json(info.max_concurrency) : nlohmann::json();
  j["warmup"] = info.warmup;
  j["duration"] = result.duration;
  j["completed"] = result.completed;
  j["failed"] = result.failed;
  j["errors"] = result.errors;
  j["error_samples"] = result.error_samples;
  j["total_input_tokens"] = result.total_input;
  j["total_output_tokens"] = result.total_output;
  j["total_cached_tokens"] = result.total_cached;
  j["prefix_cache_hit_rate"] = result.prefix_cache_hit_rate;
  j["total_streamed_output_tokens"] = result.total_streamed;
  j["request_throughput"] = result.request_throughput;
  j["request_goodput"] =
      result.request_goodput ? nlohmann::json(*result.request_goodput) : nlohmann::json();
  j["goodput_fraction"] =
      result.goodput_fraction ? nlohmann::json(*result.goodput_fraction) : nlohmann::json();
  j["output_throughput"] = result.output_throughput;
  j["total_token_throughput"] = result.total_token_throughput;
  j["max_output_tokens_per_s"] = result.max_output_tokens_per_s;
  j["max_concurrent_requests"] = result.max_concurrent_requests;
  j["peak_in_flight_requests"] = info.peak_in_flight;
  j["request_send_rate"] = result.request_send_rate;
  AddSummary(j, "ttft", result.ttft);
  AddSummary(j, "tpot", result.tpot);
  AddSummary(j, "itl", result.itl);
  AddSummary(j, "e2el", result.e2el);
  AddPerRequest(j, result);
  return j;
}

}  // namespace pagoda::bench
