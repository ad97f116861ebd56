// The per-tenant part of a multi-tenant pagoda-bench report: a table section per tenant,
// Jain's fairness index, and the "tenants" / "fairness" JSON sections.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "bench/fairness.h"
#include "bench/metrics.h"
#include "nlohmann/json.hpp"

namespace pagoda::bench {

struct TenantResult {
  std::string name;
  double weight = 1;
  BenchmarkResult result;  // over the tenant's own requests and its own run time
};

struct MultiTenantResult {
  std::vector<TenantResult> tenants;  // in --tenant order
  Fairness fairness;                  // same order
};

// The per-tenant rows (requests, throughput, TTFT/TPOT mean and p99, served tokens in the
// fairness window) and Jain's index.
void PrintTenantReport(const MultiTenantResult& m, std::FILE* out);

// Adds "tenants" (an array in --tenant order) and "fairness" to `json`.
void AddTenantsToJson(const MultiTenantResult& m, nlohmann::json* json);

}  // namespace pagoda::bench
