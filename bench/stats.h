// Summary statistics with numpy's conventions, so pagoda-bench numbers read like vLLM's.
#pragma once

#include <vector>

namespace pagoda::bench {

// numpy.percentile(values, p) with the default "linear" method: the value at rank
// p/100 * (n-1) of the sorted values, interpolated between neighbours. `p` in [0, 100];
// 0 for an empty input (vLLM reports 0 when a metric has no samples).
double Percentile(std::vector<double> values, double p);

struct Summary {
  double mean = 0;
  double median = 0;
  double std = 0;  // population standard deviation (numpy's default ddof=0)
  double p50 = 0;
  double p90 = 0;
  double p95 = 0;
  double p99 = 0;
};

// Mean, median, std and the reported percentiles of `values`, each multiplied by `scale`
// (1000 turns seconds into the report's milliseconds); all 0 when `values` is empty.
Summary Summarize(const std::vector<double>& values, double scale = 1.0);

}  // namespace pagoda::bench
