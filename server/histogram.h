// A cumulative Prometheus histogram over fixed upper bounds (plus +Inf). Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/mutex.h"

namespace pagoda::server {

class Histogram {
 public:
  // `upper_bounds` ascending, finite.
  explicit Histogram(std::vector<double> upper_bounds);
  // Counts `value` in the first bucket whose bound is >= value.
  void Observe(double value);
  // Appends the _bucket, _sum and _count samples of metric `name`; `labels` (a list of
  // LabelPair()s, may be empty) goes on every sample, before `le`.
  void AppendSamples(absl::string_view name, absl::string_view labels, std::string* out) const;

 private:
  const std::vector<double> bounds_;
  mutable Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, not cumulative
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pagoda::server
