#include "bench/stats.h"

#include <algorithm>
#include <cmath>

namespace pagoda::bench {
namespace {

// numpy's linear method on already sorted, non-empty values.
double PercentileOfSorted(const std::vector<double>& sorted, double p) {
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return PercentileOfSorted(values, p);
}

Summary Summarize(const std::vector<double>& values, double scale) {
  Summary s;
  if (values.empty()) return s;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : sorted) sum += v;
  const double mean = sum / static_cast<double>(sorted.size());
  double sq = 0;
  for (double v : sorted) sq += (v - mean) * (v - mean);
  s.mean = mean * scale;
  s.std = std::sqrt(sq / static_cast<double>(sorted.size())) * scale;
  s.median = PercentileOfSorted(sorted, 50) * scale;
  s.p50 = s.median;
  s.p90 = PercentileOfSorted(sorted, 90) * scale;
  s.p95 = PercentileOfSorted(sorted, 95) * scale;
  s.p99 = PercentileOfSorted(sorted, 99) * scale;
  return s;
}

}  // namespace pagoda::bench
