#include "bench/tenant_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagoda::bench {
namespace {

void Row(std::FILE* out, const std::string& name, const std::string& value) {
  absl::FPrintF(out, "%-40s %-10s\n", name + ":", value);
}

std::string Num(double v) { return absl::StrFormat("%.2f", v); }

nlohmann::json SummaryJson(const Summary& s) {
  return {{"mean", s.mean}, {"median", s.median}, {"std", s.std}, {"p50", s.p50},
          {"p90", s.p90},   {"p95", s.p95},       {"p99", s.p99}};
}

}  // namespace

void PrintTenantReport(const MultiTenantResult& m, std::FILE* out) {
  for (size_t i = 0; i < m.tenants.size(); ++i) {
    const TenantResult& t = m.tenants[i];
    const BenchmarkResult& r = t.result;
    absl::FPrintF(out, "%s\n",
                  absl::StrFormat("---- Tenant %s (weight %g) ", t.name, t.weight) +
                      std::string(std::max<int>(0, 32 - static_cast<int>(t.name.size())), '-'));
    Row(out, "Successful requests", absl::StrCat(r.completed));
    Row(out, "Failed requests", absl::StrCat(r.failed));
    for (const auto& [code, count] : r.errors) Row(out, "  " + code, absl::StrCat(count));
    Row(out, "Total generated tokens", absl::StrCat(r.total_output));
    Row(out, "Request throughput (req/s)", Num(r.request_throughput));
    Row(out, "Output token throughput (tok/s)", Num(r.output_throughput));
    Row(out, "Mean TTFT (ms)", Num(r.ttft.mean));
    Row(out, "P99 TTFT (ms)", Num(r.ttft.p99));
    Row(out, "Mean TPOT (ms)", Num(r.tpot.mean));
    Row(out, "P99 TPOT (ms)", Num(r.tpot.p99));
    Row(out, "Tokens in the fairness window", absl::StrCat(m.fairness.window_tokens[i]));
  }
  absl::FPrintF(out, "%s\n", std::string(50, '-'));
  Row(out, "Fairness window (s)", Num(m.fairness.window_end - m.fairness.window_start));
  Row(out, "Jain's index (tokens / weight)",
      m.fairness.jain ? absl::StrFormat("%.4f", *m.fairness.jain) : "n/a");
  absl::FPrintF(out, "%s\n", std::string(50, '='));
}

void AddTenantsToJson(const MultiTenantResult& m, nlohmann::json* json) {
  nlohmann::json tenants = nlohmann::json::array();
  for (size_t i = 0; i < m.tenants.size(); ++i) {
    const TenantResult& t = m.tenants[i];
    const BenchmarkResult& r = t.result;
    tenants.push_back({{"name", t.name},
                       {"weight", t.weight},
                       {"completed", r.completed},
                       {"failed", r.failed},
                       {"errors", r.errors},
                       {"duration", r.duration},
                       {"total_input_tokens", r.total_input},
                       {"total_output_tokens", r.total_output},
                       {"request_throughput", r.request_throughput},
                       {"output_throughput", r.output_throughput},
                       {"ttft_ms", SummaryJson(r.ttft)},
                       {"tpot_ms", SummaryJson(r.tpot)},
                       {"itl_ms", SummaryJson(r.itl)},
                       {"e2el_ms", SummaryJson(r.e2el)},
                       {"window_output_tokens", m.fairness.window_tokens[i]},
                       {"window_output_tokens_per_weight", m.fairness.normalized[i]}});
  }
  (*json)["tenants"] = std::move(tenants);
  (*json)["fairness"] = {
      {"window_seconds", m.fairness.window_end - m.fairness.window_start},
      {"jain_index", m.fairness.jain ? nlohmann::json(*m.fairness.jain) : nlohmann::json()}};
}

}  // namespace pagoda::bench
