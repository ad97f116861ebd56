#include "server/histogram.h"

#include "absl/strings/str_cat.h"
#include "server/exposition.h"

namespace pagoda::server {

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

void Histogram::AppendSamples(absl::string_view name, absl::string_view labels,
                              std::string* out) const {
  const std::string bucket = absl::StrCat(name, "_bucket");
  MutexLock lock(&mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    AppendSample(bucket, JoinLabels(labels, LabelPair("le", FormatSampleValue(bounds_[i]))),
                 static_cast<double>(cumulative), out);
  }
  AppendSample(bucket, JoinLabels(labels, LabelPair("le", "+Inf")), static_cast<double>(count_),
               out);
  AppendSample(absl::StrCat(name, "_sum"), labels, sum_, out);
  AppendSample(absl::StrCat(name, "_count"), labels, static_cast<double>(count_), out);
}

}  // namespace pagoda::server
