// The Prometheus exposition with tenant labels (exact lines for a known sequence of
// observations) and the access-log line format (escaping of client-supplied values).
#include "server/metrics.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/access_log.h"
#include "server/exposition.h"

namespace pagoda::server {
namespace {

// The sample lines of metric `name` (that exact name, with or without labels), in order.
std::vector<std::string> Samples(const std::string& text, const std::string& name) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.substr(0, name.size()) != name || line.size() == name.size()) continue;
    if (line[name.size()] == '{' || line[name.size()] == ' ') out.emplace_back(line);
  }
  return out;
}

std::vector<std::string> TypeLines(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.substr(0, 7) == "# TYPE ") out.emplace_back(line.substr(7));
  }
  return out;
}

engine::EngineStats Stats() {
  engine::EngineStats s;
  s.num_running = 3;
  s.num_waiting = 7;
  s.num_blocks = 100;
  s.num_free_blocks = 75;
  s.kv_usage = 0.25;
  s.num_preemptions = 2;
  s.num_steps = 12345678901;
  s.num_submitted = 11;
  s.prefix_cache_queries = 2000;
  s.prefix_cache_hits = 1500;
  s.prefix_cache_evictions = 3;
  s.num_swap_outs = 4;
  s.num_swapped = 1;
  s.num_swap_blocks = 64;
  s.num_free_swap_blocks = 60;
  s.tenants = {
      {.name = "", .num_running = 1, .num_waiting = 0, .num_blocks_held = 5, .served_tokens = 40},
      {.name = "team-a",
       .num_running = 2,
       .num_waiting = 7,
       .num_blocks_held = 20,
       .served_tokens = 900}};
  return s;
}

TEST(MetricsExpositionTest, EveryFamilyIsDeclaredOnceInOrder) {
  ServerMetrics metrics(16);
  EXPECT_EQ(TypeLines(metrics.Render(engine::EngineStats())),
            (std::vector<std::string>{
                "pagoda:num_requests_running gauge",
                "pagoda:num_requests_waiting gauge",
                "pagoda:kv_cache_usage_perc gauge",
                "pagoda:cache_config_info gauge",
                "pagoda:kv_cache_total_blocks gauge",
                "pagoda:kv_cache_free_blocks gauge",
                "pagoda:num_preemptions_total counter",
                "pagoda:num_swap_outs_total counter",
                "pagoda:num_requests_swapped gauge",
                "pagoda:swap_space_free_blocks gauge",
                "pagoda:swap_space_total_blocks gauge",
                "pagoda:prefix_cache_queries_total counter",
                "pagoda:prefix_cache_hits_total counter",
                "pagoda:prefix_cache_evictions_total counter",
                "pagoda:engine_steps_total counter",
                "pagoda:engine_requests_submitted_total counter",
                "pagoda:tenant_num_requests_running gauge",
                "pagoda:tenant_num_requests_waiting gauge",
                "pagoda:tenant_kv_cache_blocks gauge",
                "pagoda:tenant_served_tokens_total counter",
                "pagoda:tenant_grammar_steps_total counter",
                "pagoda:prompt_tokens_total counter",
                "pagoda:generation_tokens_total counter",
                "pagoda:request_cancelled_total counter",
                "pagoda:request_unsent_limit_total counter",
                "pagoda:tenant_preparation_cpu_microseconds_total counter",
                "pagoda:request_success_total counter",
                "pagoda:request_failure_total counter",
                "pagoda:time_to_first_token_seconds histogram",
                "pagoda:inter_token_latency_seconds histogram",
                "pagoda:e2e_request_latency_seconds histogram",
                "pagoda:request_queue_time_seconds histogram",
            }));
}

TEST(MetricsExpositionTest, EngineGaugesAreUnlabeledAndTenantGaugesLabeled) {
  ServerMetrics metrics(16);
  const std::string text = metrics.Render(Stats());
  EXPECT_EQ(Samples(text, "pagoda:num_requests_waiting"),
            (std::vector<std::string>{"pagoda:num_requests_waiting 7"}));
  EXPECT_EQ(Samples(text, "pagoda:kv_cache_usage_perc"),
            (std::vector<std::string>{"pagoda:kv_cache_usage_perc 0.25"}));
  EXPECT_EQ(Samples(text, "pagoda:cache_config_info"),
            (std::vector<std::string>{
                "pagoda:cache_config_info{block_size=\"16\",num_gpu_blocks=\"100\"} 1"}));
  // Large counts print exactly, not as a 9-digit exponent form.
  EXPECT_EQ(Samples(text, "pagoda:engine_steps_total"),
            (std::vector<std::string>{"pagoda:engine_steps_total 12345678901"}));
  EXPECT_EQ(Samples(text, "pagoda:engine_requests_submitted_total"),
            (std::vector<std::string>{"pagoda:engine_requests_submitted_total 11"}));
  EXPECT_EQ(Samples(text, "pagoda:prefix_cache_queries_total"),
            (std::vector<std::string>{"pagoda:prefix_cache_queries_total 2000"}));
  EXPECT_EQ(Samples(text, "pagoda:prefix_cache_hits_total"),
            (std::vector<std::string>{"pagoda:prefix_cache_hits_total 1500"}));
  EXPECT_EQ(Samples(text, "pagoda:prefix_cache_evictions_total"),
            (std::vector<std::string>{"pagoda:prefix_cache_evictions_total 3"}));
  EXPECT_EQ(Samples(text, "pagoda:num_swap_outs_total"),
            (std::vector<std::string>{"pagoda:num_swap_outs_total 4"}));
  EXPECT_EQ(Samples(text, "pagoda:num_requests_swapped"),
            (std::vector<std::string>{"pagoda:num_requests_swapped 1"}));
  EXPECT_EQ(Samples(text, "pagoda:swap_space_free_blocks"),
            (std::vector<std::string>{"pagoda:swap_space_free_blocks 60"}));
  EXPECT_EQ(Samples(text, "pagoda:swap_space_total_blocks"),
            (std::vector<std::string>{"pagoda:swap_space_total_blocks 64"}));
  EXPECT_EQ(Samples(text, "pagoda:tenant_num_requests_waiting"),
            (std::vector<std::string>{"pagoda:tenant_num_requests_waiting{tenant=\"anonymous\"} 0",
                                      "pagoda:tenant_num_requests_waiting{tenant=\"team-a\"} 7"}));
  EXPECT_EQ(Samples(text, "pagoda:tenant_kv_cache_blocks"),
            (std::vector<std::string>{"pagoda:tenant_kv_cache_blocks{tenant=\"anonymous\"} 5",
                                      "pagoda:tenant_kv_cache_blocks{tenant=\"team-a\"} 20"}));
  EXPECT_EQ(Samples(text, "pagoda:tenant_served_tokens_total"),
            (std::vector<std::string>{"pagoda:tenant_served_tokens_total{tenant=\"anonymous\"} 40",
                                      "pagoda:tenant_served_tokens_total{tenant=\"team-a\"} 900"}));
}

TEST(MetricsExpositionTest, AnonymousSeriesStartAtZero) {
  ServerMetrics metrics;
  const std::string text = metrics.Render(engine::EngineStats());
  EXPECT_EQ(Samples(text, "pagoda:generation_tokens_total"),
            (std::vector<std::string>{"pagoda:generation_tokens_total{tenant=\"anonymous\"} 0"}));
  EXPECT_EQ(Samples(text, "pagoda:request_success_total"), std::vector<std::string>{});
  EXPECT_EQ(Samples(text, "pagoda:e2e_request_latency_seconds_count"),
            (std::vector<std::string>{
                "pagoda:e2e_request_latency_seconds_count{tenant=\"anonymous\"} 0"}));
}

TEST(MetricsExpositionTest, RequestFamiliesCarryTheTenantLabel) {
  ServerMetrics metrics(16);
  TenantMetrics& anonymous = metrics.ForTenant("");
  TenantMetrics& a = metrics.ForTenant("team-a");
  EXPECT_EQ(&metrics.ForTenant("team-a"), &a);
  anonymous.prompt_tokens += 12;
  anonymous.generation_tokens += 30;
  anonymous.request_success.Inc("stop");
  anonymous.request_success.Inc("stop");
  anonymous.request_failure.Inc("INVALID_ARGUMENT");
  a.prompt_tokens += 5;
  a.requests_cancelled += 1;
  a.request_success.Inc("length");
  a.request_failure.Inc("RESOURCE_EXHAUSTED", 3);
  a.time_to_first_token.Observe(0.003);
  a.time_to_first_token.Observe(0.2);
  a.time_to_first_token.Observe(100);  // above every bound: +Inf only
  const std::string text = metrics.Render(engine::EngineStats());

  EXPECT_EQ(Samples(text, "pagoda:prompt_tokens_total"),
            (std::vector<std::string>{"pagoda:prompt_tokens_total{tenant=\"anonymous\"} 12",
                                      "pagoda:prompt_tokens_total{tenant=\"team-a\"} 5"}));
  EXPECT_EQ(Samples(text, "pagoda:generation_tokens_total"),
            (std::vector<std::string>{"pagoda:generation_tokens_total{tenant=\"anonymous\"} 30",
                                      "pagoda:generation_tokens_total{tenant=\"team-a\"} 0"}));
  EXPECT_EQ(Samples(text, "pagoda:request_cancelled_total"),
            (std::vector<std::string>{"pagoda:request_cancelled_total{tenant=\"anonymous\"} 0",
                                      "pagoda:request_cancelled_total{tenant=\"team-a\"} 1"}));
  EXPECT_EQ(Samples(text, "pagoda:request_success_total"),
            (std::vector<std::string>{
                "pagoda:request_success_total{tenant=\"anonymous\",finished_reason=\"stop\"} 2",
                "pagoda:request_success_total{tenant=\"team-a\",finished_reason=\"length\"} 1"}));
  EXPECT_EQ(Samples(text, "pagoda:request_failure_total"),
            (std::vector<std::string>{
                "pagoda:request_failure_total{tenant=\"anonymous\",code=\"INVALID_ARGUMENT\"} 1",
                "pagoda:request_failure_total{tenant=\"team-a\",code=\"RESOURCE_EXHAUSTED\"} 3"}));

  std::vector<std::string> want;
  const std::vector<std::pair<const char*, int>> buckets = {
      {"0.001", 0}, {"0.005", 1}, {"0.01", 1}, {"0.02", 1}, {"0.04", 1}, {"0.06", 1}, {"0.08", 1},
      {"0.1", 1},   {"0.25", 2},  {"0.5", 2},  {"0.75", 2}, {"1", 2},    {"2.5", 2},  {"5", 2},
      {"7.5", 2},   {"10", 2},    {"20", 2},   {"40", 2},   {"80", 2},   {"+Inf", 3}};
  for (const auto& [le, n] : buckets) {
    want.push_back("pagoda:time_to_first_token_seconds_bucket{tenant=\"team-a\",le=\"" +
                   std::string(le) + "\"} " + std::to_string(n));
  }
  std::vector<std::string> got;
  for (const std::string& line : Samples(text, "pagoda:time_to_first_token_seconds_bucket")) {
    if (line.find("tenant=\"team-a\"") != std::string::npos) got.push_back(line);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(Samples(text, "pagoda:time_to_first_token_seconds_sum"),
            (std::vector<std::string>{
                "pagoda:time_to_first_token_seconds_sum{tenant=\"anonymous\"} 0",
                "pagoda:time_to_first_token_seconds_sum{tenant=\"team-a\"} 100.203"}));
  EXPECT_EQ(
      Samples(text, "pagoda:time_to_first_token_seconds_count"),
      (std::vector<std::string>{"pagoda:time_to_first_token_seconds_count{tenant=\"anonymous\"} 0",
                                "pagoda:time_to_first_token_seconds_count{tenant=\"team-a\"} 3"}));
}

TEST(MetricsExpositionTest, LabelValuesAreEscaped) {
  EXPECT_EQ(LabelPair("tenant", "a\"b\\c\nd"), "tenant=\"a\\\"b\\\\c\\nd\"");
  ServerMetrics metrics;
  metrics.ForTenant("x\"y").prompt_tokens += 1;
  EXPECT_EQ(Samples(metrics.Render(engine::EngineStats()), "pagoda:prompt_tokens_total"),
            (std::vector<std::string>{"pagoda:prompt_tokens_total{tenant=\"anonymous\"} 0",
                                      "pagoda:prompt_tokens_total{tenant=\"x\\\"y\"} 1"}));
}

TEST(MetricsExpositionTest, SampleValues) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(-3), "-3");
  EXPECT_EQ(FormatSampleValue(0.1 + 0.2), "0.3");
  EXPECT_EQ(FormatSampleValue(9007199254740993.0), "9.00719925e+15");
  EXPECT_EQ(FormatSampleValue(1.0 / 0.0), "+Inf");
}

TEST(AccessLogTest, FinishedRequestLine) {
  EXPECT_EQ(FormatAccessLog({.tenant = "team-a",
                             .request_id = "req-7",
                             .status = "OK",
                             .finish_reason = "stop",
                             .prompt_tokens = 12,
                             .completion_tokens = 30,
                             .cached_tokens = 8,
                             .queue_time = absl::Microseconds(1250),
                             .time_to_first_token = absl::Milliseconds(3),
                             .e2e = absl::Milliseconds(20)}),
            "access tenant=\"team-a\" request_id=\"req-7\" status=OK finish_reason=stop "
            "prompt_tokens=12 completion_tokens=30 cached_tokens=8 queue_ms=1.250 ttft_ms=3.000 "
            "e2e_ms=20.000");
}

TEST(AccessLogTest, RejectedRequestLineNamesTheAnonymousTenantAndTheError) {
  EXPECT_EQ(FormatAccessLog({.tenant = "",
                             .request_id = "",
                             .status = "RESOURCE_EXHAUSTED",
                             .error = "queue full (max_queued_requests 4)",
                             .e2e = absl::Microseconds(1)}),
            "access tenant=\"anonymous\" request_id=\"\" status=RESOURCE_EXHAUSTED "
            "finish_reason=- prompt_tokens=0 completion_tokens=0 cached_tokens=0 queue_ms=- "
            "ttft_ms=- e2e_ms=0.001 error=\"queue full (max_queued_requests 4)\"");
}

TEST(AccessLogTest, ClientValuesCannotForgeALine) {
  // C0 controls, DEL, quotes and backslashes; C1 NEL (U+0085) and U+2028/U+2029 (line
  // breaks to some log viewers); other UTF-8 passes through.
  EXPECT_EQ(QuoteLogValue("a\nb\r\tc\"d\\e\x01\x7f"), "\"a\\nb\\r\\tc\\\"d\\\\e\\x01\\x7f\"");
  EXPECT_EQ(QuoteLogValue("x\xc2\x85y\xe2\x80\xa8z\xe2\x80\xa9"),
            "\"x\\u{0085}y\\u{2028}z\\u{2029}\"");
  EXPECT_EQ(QuoteLogValue("caf\xc3\xa9 \xe2\x82\xac"), "\"caf\xc3\xa9 \xe2\x82\xac\"");
  const std::string line =
      FormatAccessLog({.tenant = "t\n", .request_id = "r\naccess tenant=\"x\"", .status = "OK"});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.rfind("access tenant=\"t\\n\" request_id=\"r\\naccess tenant=\\\"x\\\"\" ", 0), 0u)
      << line;
}

}  // namespace
}  // namespace pagoda::server
