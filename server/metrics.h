// Prometheus metrics of the daemon, rendered in the text exposition format. Names follow
// vLLM's (prefix "pagoda:" instead of "vllm:") where vLLM has one.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "engine/engine.h"

namespace pagoda::server {

// A cumulative histogram over fixed upper bounds (plus +Inf).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Appends HELP, TYPE, _bucket, _sum and _count lines for metric `name`.
  void AppendText(const std::string& name, const std::string& help, std::string* out) const;

 private:
  const std::vector<double> bounds_;
  mutable Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, not cumulative
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// A counter with one label.
class LabeledCounter {
 public:
  explicit LabeledCounter(std::string label) : label_(std::move(label)) {}
  void Inc(const std::string& value, int64_t n = 1);
  int64_t Get(const std::string& value) const;
  void AppendText(const std::string& name, const std::string& help, std::string* out) const;

 private:
  const std::string label_;
  mutable Mutex mu_;
  std::map<std::string, int64_t> values_ ABSL_GUARDED_BY(mu_);
};

struct ServerMetrics {
  ServerMetrics();

  Histogram time_to_first_token;
  Histogram inter_token_latency;
  Histogram e2e_request_latency;
  Histogram request_queue_time;
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> generation_tokens{0};
  std::atomic<int64_t> requests_cancelled{0};  // client cancel, disconnect or deadline
  LabeledCounter request_success{"finished_reason"};
  LabeledCounter request_failure{"code"};  // rejected or failed, by gRPC code name

  // The whole exposition, engine gauges included.
  std::string Render(const engine::EngineStats& stats) const;
};

}  // namespace pagoda::server
