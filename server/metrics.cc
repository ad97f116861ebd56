#include "server/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagoda::server {
namespace {

std::string Number(double v) { return absl::StrFormat("%.9g", v); }

void AppendHeader(const std::string& name, const std::string& help, const char* type,
                  std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void AppendScalar(const std::string& name, const std::string& help, const char* type, double v,
                  std::string* out) {
  AppendHeader(name, help, type, out);
  absl::StrAppend(out, name, " ", Number(v), "\n");
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  MutexLock lock(&mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::AppendText(const std::string& name, const std::string& help,
                           std::string* out) const {
  AppendHeader(name, help, "histogram", out);
  MutexLock lock(&mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    absl::StrAppend(out, name, "_bucket{le=\"", Number(bounds_[i]), "\"} ", cumulative, "\n");
  }
  absl::StrAppend(out, name, "_bucket{le=\"+Inf\"} ", count_, "\n");
  absl::StrAppend(out, name, "_sum ", Number(sum_), "\n", name, "_count ", count_, "\n");
}

void LabeledCounter::Inc(const std::string& value, int64_t n) {
  MutexLock lock(&mu_);
  values_[value] += n;
}

int64_t LabeledCounter::Get(const std::string& value) const {
  MutexLock lock(&mu_);
  auto it = values_.find(value);
  return it == values_.end() ? 0 : it->second;
}

void LabeledCounter::AppendText(const std::string& name, const std::string& help,
                                std::string* out) const {
  AppendHeader(name, help, "counter", out);
  MutexLock lock(&mu_);
  for (const auto& [value, n] : values_) {
    absl::StrAppend(out, name, "{", label_, "=\"", value, "\"} ", n, "\n");
  }
}

ServerMetrics::ServerMetrics()
    : time_to_first_token({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                           2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      inter_token_latency({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
                           0.5, 0.75, 1.0, 2.5, 5.0, 10.0}),
      e2e_request_latency({0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,
                           5.0,  10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0}),
      request_queue_time({0.001, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0,
                          10.0, 20.0, 30.0, 60.0, 120.0}) {}

std::string ServerMetrics::Render(const engine::EngineStats& s) const {
  std::string out;
  AppendScalar("pagoda:num_requests_running", "Requests running in the engine.", "gauge",
               s.num_running, &out);
  AppendScalar("pagoda:num_requests_waiting", "Requests waiting to run (preempted included).",
               "gauge", s.num_waiting, &out);
  AppendScalar("pagoda:kv_cache_usage_perc", "Fraction of KV-cache blocks in use (1 = full).",
               "gauge", s.kv_usage, &out);
  AppendScalar("pagoda:kv_cache_total_blocks", "KV-cache blocks in the pool.", "gauge",
               s.num_blocks, &out);
  AppendScalar("pagoda:kv_cache_free_blocks", "KV-cache blocks free.", "gauge", s.num_free_blocks,
               &out);
  AppendScalar("pagoda:num_preemptions_total", "Sequences preempted for lack of KV blocks.",
               "counter", static_cast<double>(s.num_preemptions), &out);
  AppendScalar("pagoda:engine_steps_total", "Engine steps run.", "counter",
               static_cast<double>(s.num_steps), &out);
  AppendScalar("pagoda:prompt_tokens_total", "Prompt tokens of accepted requests.", "counter",
               static_cast<double>(prompt_tokens.load()), &out);
  AppendScalar("pagoda:generation_tokens_total", "Tokens generated.", "counter",
               static_cast<double>(generation_tokens.load()), &out);
  AppendScalar("pagoda:request_cancelled_total",
               "Requests aborted because the client cancelled, disconnected or hit its deadline.",
               "counter", static_cast<double>(requests_cancelled.load()), &out);
  request_success.AppendText("pagoda:request_success_total", "Requests finished, by finish reason.",
                             &out);
  request_failure.AppendText("pagoda:request_failure_total",
                             "Requests rejected or failed, by gRPC status code.", &out);
  time_to_first_token.AppendText("pagoda:time_to_first_token_seconds",
                                 "Arrival to first generated token.", &out);
  inter_token_latency.AppendText("pagoda:inter_token_latency_seconds",
                                 "Time between consecutive generated tokens.", &out);
  e2e_request_latency.AppendText("pagoda:e2e_request_latency_seconds", "Arrival to last token.",
                                 &out);
  request_queue_time.AppendText("pagoda:request_queue_time_seconds",
                                "Arrival to first scheduled step.", &out);
  return out;
}

}  // namespace pagoda::server
