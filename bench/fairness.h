// Jain's fairness index of the tokens each tenant was served, per unit of weight, over the
// window in which every tenant still had requests to send (docs/BENCH.md).
#pragma once

#include <optional>
#include <vector>

#include "bench/request_record.h"

namespace pagoda::bench {

// Jain's index J = (sum x)^2 / (n * sum x^2): 1 when all x are equal, 1/n when one takes
// everything. nullopt when `x` is empty or all zero (undefined).
std::optional<double> JainIndex(const std::vector<double>& x);

// One tenant's requests as sent, and its weight (> 0).
struct TenantRecords {
  const std::vector<RequestRecord>* records = nullptr;
  double weight = 1;
};

struct Fairness {
  double window_start = 0;               // steady-clock seconds: the run's start
  double window_end = 0;                 // the earliest of the tenants' last send times
  std::vector<long long> window_tokens;  // per tenant: tokens that arrived in the window
  std::vector<double> normalized;        // window_tokens / weight
  std::optional<double> jain;            // JainIndex(normalized)
};

// The window is [start, min over tenants of the send time of its last sent request]
// (a tenant that sent nothing ends it at `start`); a tenant's served tokens are those of
// its token-carrying messages (of any request, failed or not) that arrived in the window,
// bounds included.
Fairness ComputeFairness(const std::vector<TenantRecords>& tenants, double start);

}  // namespace pagoda::bench
