#include "bench/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace pagoda::bench {
namespace {

absl::Status SetSlo(absl::string_view entry, GoodputSlo* slo) {
  const std::vector<std::string> parts = absl::StrSplit(entry, ':');
  double value = 0;
  if (parts.size() != 2 || !absl::SimpleAtod(parts[1], &value) || !(value >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--goodput entry '", entry, "' is not METRIC:MILLISECONDS"));
  }
  std::optional<double>* target = nullptr;
  if (parts[0] == "ttft") target = &slo->ttft_ms;
  if (parts[0] == "tpot") target = &slo->tpot_ms;
  if (parts[0] == "e2el") target = &slo->e2el_ms;
  if (target == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--goodput metric '", parts[0], "' is not one of ttft, tpot, e2el"));
  }
  if (target->has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("--goodput gives ", parts[0], " twice"));
  }
  *target = value;
  return absl::OkStatus();
}

// A completed request meets the SLOs when each set one is >= its metric (vLLM's test;
// TPOT is 0 for a request with at most one output token).
bool MeetsSlo(const RequestMetrics& r, const GoodputSlo& slo) {
  if (slo.ttft_ms && r.ttft * 1000.0 > *slo.ttft_ms) return false;
  if (slo.tpot_ms && r.tpot * 1000.0 > *slo.tpot_ms) return false;
  if (slo.e2el_ms && r.e2el * 1000.0 > *slo.e2el_ms) return false;
  return true;
}

// Output tokens per 1-second bucket and requests active in each bucket, counted from the
// first successful request's send time, as vLLM does; a message's tokens all land at its
// arrival time.
void FillPeaks(const std::vector<RequestRecord>& records, BenchmarkResult* result) {
  const std::vector<RequestMetrics>& metrics = result->requests;
  double min_start = 0, max_end = 0;
  bool any = false;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!metrics[i].success) continue;
    min_start = any ? std::min(min_start, records[i].send_time) : records[i].send_time;
    max_end = any ? std::max(max_end, records[i].end_time) : records[i].end_time;
    any = true;
  }
  if (!any) return;
  const size_t buckets = static_cast<size_t>(std::ceil(max_end - min_start)) + 1;
  std::vector<double> tokens(buckets, 0);
  std::vector<int> active(buckets, 0);
  for (size_t i = 0; i < records.size(); ++i) {
    if (!metrics[i].success) continue;
    const RequestRecord& r = records[i];
    for (size_t c = 0; c < r.chunk_times.size(); ++c) {
      const size_t b = static_cast<size_t>(r.chunk_times[c] - min_start);
      if (b < buckets) tokens[b] += r.chunk_tokens[c];
    }
    const size_t first = static_cast<size_t>(r.send_time - min_start);
    const size_t last = std::min(static_cast<size_t>(r.end_time - min_start), buckets - 1);
    for (size_t b = first; b <= last; ++b) ++active[b];
  }
  result->max_output_tokens_per_s = *std::max_element(tokens.begin(), tokens.end());
  result->max_concurrent_requests = *std::max_element(active.begin(), active.end());
}

double SendRate(const std::vector<RequestRecord>& records) {
  if (records.size() < 2) return 0;
  double first = records[0].send_time, last = records[0].send_time;
  for (const RequestRecord& r : records) {
    first = std::min(first, r.send_time);
    last = std::max(last, r.send_time);
  }
  return last > first ? static_cast<double>(records.size() - 1) / (last - first) : 0;
}

}  // namespace

absl::StatusOr<GoodputSlo> ParseGoodput(const std::vector<std::string>& specs) {
  GoodputSlo slo;
  for (const std::string& spec : specs) {
    for (absl::string_view entry : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
      if (absl::Status s = SetSlo(entry, &slo); !s.ok()) return s;
    }
  }
  return slo;
}

RequestMetrics ComputeRequestMetrics(const RequestRecord& record) {
  RequestMetrics m;
  m.status = record.status;
  m.success = record.status == "OK";
  m.send_time = record.send_time;
  m.e2el = record.end_time - record.send_time;
  m.input_len = record.prompt_tokens;
  m.cached_len = record.cached_tokens;
  for (int n : record.chunk_tokens) m.streamed_tokens += n;
  if (!m.success) return m;
  m.output_len = record.completion_tokens;
  m.ttft = record.chunk_times.empty() ? m.e2el : record.chunk_times[0] - record.send_time;
  for (size_t c = 1; c < record.chunk_times.size(); ++c) {
    const int n = record.chunk_tokens[c];
    const double gap = (record.chunk_times[c] - record.chunk_times[c - 1]) / n;
    m.itls.insert(m.itls.end(), n, gap);
  }
  if (m.output_len > 1) m.tpot = (m.e2el - m.ttft) / (m.output_len - 1);
  return m;
}

BenchmarkResult ComputeResult(const std::vector<RequestRecord>& records, double duration,
                              const GoodputSlo& slo) {
  BenchmarkResult result;
  result.duration = duration;
  std::vector<double> ttfts, tpots, itls, e2els;
  int good = 0;
  for (const RequestRecord& record : records) {
    RequestMetrics m = ComputeRequestMetrics(record);
    result.total_streamed += m.streamed_tokens;
    if (m.success) {
      ++result.completed;
      result.total_input += m.input_len;
      result.total_cached += m.cached_len;
      result.total_output += m.output_len;
      ttfts.push_back(m.ttft);
      e2els.push_back(m.e2el);
      if (m.output_len > 1) tpots.push_back(m.tpot);
      itls.insert(itls.end(), m.itls.begin(), m.itls.end());
      if (MeetsSlo(m, slo)) ++good;
    } else {
      ++result.failed;
      ++result.errors[m.status];
      result.error_samples.emplace(m.status, record.error);
    }
    result.requests.push_back(std::move(m));
  }
  if (result.total_input > 0) {
    result.prefix_cache_hit_rate =
        static_cast<double>(result.total_cached) / static_cast<double>(result.total_input);
  }
  result.request_throughput = result.completed / duration;
  result.output_throughput = result.total_output / duration;
  result.total_token_throughput = (result.total_input + result.total_output) / duration;
  if (!slo.empty()) {
    result.request_goodput = good / duration;
    result.goodput_fraction = records.empty() ? 0.0 : double(good) / records.size();
  }
  result.request_send_rate = SendRate(records);
  result.ttft = Summarize(ttfts, 1000.0);
  result.tpot = Summarize(tpots, 1000.0);
  result.itl = Summarize(itls, 1000.0);
  result.e2el = Summarize(e2els, 1000.0);
  FillPeaks(records, &result);
  return result;
}

}  // namespace pagoda::bench
