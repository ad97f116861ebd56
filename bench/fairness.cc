#include "bench/fairness.h"

#include <algorithm>
#include <limits>

namespace pagoda::bench {

std::optional<double> JainIndex(const std::vector<double>& x) {
  double sum = 0, sum_sq = 0;
  for (double v : x) {
    sum += v;
    sum_sq += v * v;
  }
  if (x.empty() || sum_sq == 0) return std::nullopt;
  return sum * sum / (static_cast<double>(x.size()) * sum_sq);
}

Fairness ComputeFairness(const std::vector<TenantRecords>& tenants, double start) {
  Fairness f;
  f.window_start = start;
  f.window_end = tenants.empty() ? start : std::numeric_limits<double>::infinity();
  for (const TenantRecords& t : tenants) {
    double last_send = start;
    for (const RequestRecord& r : *t.records) last_send = std::max(last_send, r.send_time);
    f.window_end = std::min(f.window_end, last_send);
  }
  for (const TenantRecords& t : tenants) {
    long long tokens = 0;
    for (const RequestRecord& r : *t.records) {
      for (size_t c = 0; c < r.chunk_times.size(); ++c) {
        if (r.chunk_times[c] >= f.window_start && r.chunk_times[c] <= f.window_end) {
          tokens += r.chunk_tokens[c];
        }
      }
    }
    f.window_tokens.push_back(tokens);
    f.normalized.push_back(static_cast<double>(tokens) / t.weight);
  }
  f.jain = JainIndex(f.normalized);
  return f;
}

}  // namespace pagoda::bench
