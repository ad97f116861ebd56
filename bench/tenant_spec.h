// One tenant of a multi-tenant pagoda-bench run: its key, weight and offered load, from a
// `--tenant name=a,key=KEY,weight=1,concurrency=8` (or `rate=R`) specification.
#pragma once

#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pagoda::bench {

struct TenantSpec {
  std::string name;
  std::string api_key;  // sent as "authorization: Bearer <key>"; empty = none
  double weight = 1;    // divides the tenant's served tokens in Jain's index
  int concurrency = 0;  // most requests in flight; 0 = unlimited
  double request_rate = std::numeric_limits<double>::infinity();  // req/s; inf = closed loop
  int num_prompts = 0;                                            // requests to send
};

// Parses comma-separated KEY=VALUE fields: name (required), key, weight (> 0),
// concurrency (>= 0), rate (> 0 or inf), num-prompts (>= 1). Fields not given take the
// values in `defaults` (the run-wide flags). InvalidArgument naming the bad field.
absl::StatusOr<TenantSpec> ParseTenantSpec(absl::string_view spec, const TenantSpec& defaults);

}  // namespace pagoda::bench
