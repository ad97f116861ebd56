// Unit tests of pagoda-bench's arithmetic: percentiles, arrival schedule, per-request
// latencies, the run's totals and peaks, goodput, argv spelling, datasets, JSON keys,
// tenant specifications, Jain's index and the fairness window.
#include <cmath>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/arrival_schedule.h"
#include "bench/bench_app.h"
#include "bench/bench_args.h"
#include "bench/bench_flags.h"
#include "bench/dataset.h"
#include "bench/fairness.h"
#include "bench/metrics.h"
#include "bench/progress.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "bench/tenant_report.h"
#include "bench/tenant_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda::bench {
namespace {

using ::testing::ElementsAre;

constexpr double kEps = 1e-12;

TEST(PercentileTest, MatchesNumpyLinear) {
  // Values from numpy.percentile with the default method.
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_NEAR(Percentile({4, 3, 2, 1}, 90), 3.7, kEps);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 100), 4);
  EXPECT_NEAR(Percentile({15, 20, 35, 40, 50}, 40), 29, kEps);
  EXPECT_NEAR(Percentile({15, 20, 35, 40, 50}, 99), 49.6, kEps);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
}

TEST(SummarizeTest, MeanMedianPopulationStdAndPercentilesScaled) {
  const Summary s = Summarize({0.004, 0.001, 0.003, 0.002}, 1000.0);
  EXPECT_NEAR(s.mean, 2.5, kEps);
  EXPECT_NEAR(s.median, 2.5, kEps);
  EXPECT_NEAR(s.std, std::sqrt(1.25), kEps);  // numpy.std, ddof=0
  EXPECT_NEAR(s.p50, 2.5, kEps);
  EXPECT_NEAR(s.p90, 3.7, kEps);
  EXPECT_NEAR(s.p95, 3.85, kEps);
  EXPECT_NEAR(s.p99, 3.97, kEps);
  const Summary empty = Summarize({}, 1000.0);
  EXPECT_EQ(empty.mean, 0);
  EXPECT_EQ(empty.p99, 0);
}

TEST(ArrivalScheduleTest, RescalesSoTheLastIsSentAtNOverRate) {
  EXPECT_THAT(RescaleArrivals({1, 1, 2}, 1.0), ElementsAre(0.75, 1.5, 3.0));
  EXPECT_THAT(RescaleArrivals({2, 2}, 4.0), ElementsAre(0.25, 0.5));
  EXPECT_THAT(RescaleArrivals({0, 0}, 4.0), ElementsAre(0.0, 0.0));
}

TEST(ArrivalScheduleTest, GammaScheduleIsSortedSeededAndEndsExactly) {
  for (double burstiness : {0.25, 1.0, 4.0}) {
    std::mt19937_64 rng(7);
    const std::vector<double> t = GammaArrivalTimes(200, 100.0, burstiness, rng);
    ASSERT_EQ(t.size(), 200u);
    EXPECT_EQ(t.back(), 2.0);
    EXPECT_GT(t.front(), 0.0);
    for (size_t i = 1; i < t.size(); ++i) EXPECT_LE(t[i - 1], t[i]);
    std::mt19937_64 again(7);
    EXPECT_EQ(GammaArrivalTimes(200, 100.0, burstiness, again), t);
  }
}

TEST(ArrivalScheduleTest, InfiniteRateSendsEverythingAtOnce) {
  std::mt19937_64 rng(1);
  EXPECT_THAT(GammaArrivalTimes(3, std::numeric_limits<double>::infinity(), 1.0, rng),
              ElementsAre(0.0, 0.0, 0.0));
  EXPECT_TRUE(GammaArrivalTimes(0, 5.0, 1.0, rng).empty());
}

RequestRecord Record(double send, std::vector<double> times, std::vector<int> tokens, double end,
                     int completion, std::string status = "OK") {
  RequestRecord r;
  r.send_time = send;
  r.chunk_times = std::move(times);
  r.chunk_tokens = std::move(tokens);
  r.end_time = end;
  r.prompt_tokens = 8;
  r.completion_tokens = completion;
  r.status = std::move(status);
  return r;
}

TEST(RequestMetricsTest, TtftItlSplitOverTokensTpotE2el) {
  const RequestMetrics m =
      ComputeRequestMetrics(Record(10.0, {10.1, 10.3, 10.4}, {1, 2, 1}, 10.5, 4));
  EXPECT_TRUE(m.success);
  EXPECT_NEAR(m.ttft, 0.1, 1e-9);
  EXPECT_NEAR(m.e2el, 0.5, 1e-9);
  ASSERT_EQ(m.itls.size(), 3u);  // 0.2 s over 2 tokens, then 0.1 s
  for (double itl : m.itls) EXPECT_NEAR(itl, 0.1, 1e-9);
  EXPECT_NEAR(m.tpot, 0.4 / 3, 1e-9);
  EXPECT_EQ(m.output_len, 4);
  EXPECT_EQ(m.streamed_tokens, 4);
  EXPECT_EQ(m.input_len, 8);
}

TEST(RequestMetricsTest, OneTokenHasNoTpotAndNoTokensTakesTtftAsE2el) {
  const RequestMetrics one = ComputeRequestMetrics(Record(1.0, {1.25}, {1}, 1.5, 1));
  EXPECT_EQ(one.tpot, 0);
  EXPECT_TRUE(one.itls.empty());
  const RequestMetrics none = ComputeRequestMetrics(Record(1.0, {}, {}, 1.5, 0));
  EXPECT_NEAR(none.ttft, 0.5, kEps);
  EXPECT_NEAR(none.e2el, 0.5, kEps);
}

TEST(RequestMetricsTest, FailedRequestCountsNoOutput) {
  const RequestMetrics m =
      ComputeRequestMetrics(Record(1.0, {1.1}, {1}, 1.2, 5, "RESOURCE_EXHAUSTED"));
  EXPECT_FALSE(m.success);
  EXPECT_EQ(m.status, "RESOURCE_EXHAUSTED");
  EXPECT_EQ(m.output_len, 0);
  EXPECT_EQ(m.ttft, 0);
}

std::vector<RequestRecord> ThreeRecords() {
  return {
      // ttft 0.1, tpot 0.1, e2el 0.3; tokens in bucket 0 (1) and bucket 0 (2)
      Record(0.0, {0.1, 0.3}, {1, 2}, 0.3, 3),
      // ttft 0.2, tpot 0.9, e2el 2.0; tokens in buckets 0, 1 and 1
      Record(0.5, {0.7, 1.2, 1.3}, {1, 1, 1}, 2.5, 3),
      Record(1.0, {}, {}, 1.1, 0, "UNAVAILABLE"),
  };
}

TEST(ComputeResultTest, PrefixCacheHitRateIsCachedOverPromptTokensOfCompletedRequests) {
  std::vector<RequestRecord> records = ThreeRecords();
  records[0].cached_tokens = 4;
  records[1].cached_tokens = 2;
  records[2].cached_tokens = 8;  // failed: not counted
  const BenchmarkResult r = ComputeResult(records, 2.0, GoodputSlo());
  EXPECT_EQ(r.total_cached, 6);
  EXPECT_DOUBLE_EQ(r.prefix_cache_hit_rate, 6.0 / 16.0);
  const nlohmann::json j = ResultToJson(r, RunInfo());
  EXPECT_EQ(j.at("total_cached_tokens"), 6);
  EXPECT_DOUBLE_EQ(j.at("prefix_cache_hit_rate").get<double>(), 0.375);
  EXPECT_EQ(ComputeResult({}, 1.0, GoodputSlo()).prefix_cache_hit_rate, 0);
}

TEST(ComputeResultTest, TotalsThroughputsAndErrorsByCode) {
  std::vector<RequestRecord> records = ThreeRecords();
  records[2].error = "connection refused";
  const BenchmarkResult r = ComputeResult(records, 2.0, GoodputSlo());
  EXPECT_EQ(r.completed, 2);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.errors, (std::map<std::string, int>{{"UNAVAILABLE", 1}}));
  EXPECT_EQ(r.error_samples.at("UNAVAILABLE"), "connection refused");
  EXPECT_EQ(r.total_input, 16);
  EXPECT_EQ(r.total_output, 6);
  EXPECT_EQ(r.total_streamed, 6);
  EXPECT_DOUBLE_EQ(r.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(r.output_throughput, 3.0);
  EXPECT_DOUBLE_EQ(r.total_token_throughput, 11.0);
  EXPECT_FALSE(r.request_goodput.has_value());
  EXPECT_NEAR(r.ttft.mean, 150, 1e-6);
  EXPECT_NEAR(r.e2el.median, 1150, 1e-6);
  EXPECT_NEAR(r.tpot.mean, 500, 1e-6);  // (100 + 900) / 2
  EXPECT_EQ(r.requests.size(), 3u);
  EXPECT_DOUBLE_EQ(r.request_send_rate, 2.0);  // 2 gaps over 1 s
}

TEST(ComputeResultTest, PeaksOverOneSecondBuckets) {
  const BenchmarkResult r = ComputeResult(ThreeRecords(), 2.0, GoodputSlo());
  // Bucket 0 holds 1 + 2 + 1 tokens, bucket 1 holds 2; both requests are active in bucket 0.
  EXPECT_EQ(r.max_output_tokens_per_s, 4);
  EXPECT_EQ(r.max_concurrent_requests, 2);
}

TEST(ComputeResultTest, GoodputCountsRequestsMeetingEverySlo) {
  absl::StatusOr<GoodputSlo> slo = ParseGoodput({"ttft:150", "e2el:1000"});
  ASSERT_TRUE(slo.ok());
  const BenchmarkResult r = ComputeResult(ThreeRecords(), 2.0, *slo);
  ASSERT_TRUE(r.request_goodput.has_value());
  EXPECT_DOUBLE_EQ(*r.request_goodput, 0.5);  // only the first request is good
  EXPECT_DOUBLE_EQ(*r.goodput_fraction, 1.0 / 3);
}

TEST(ParseGoodputTest, AcceptsListsAndRejectsNonsense) {
  absl::StatusOr<GoodputSlo> slo = ParseGoodput({"ttft:500,tpot:50", "e2el:2000"});
  ASSERT_TRUE(slo.ok());
  EXPECT_EQ(*slo->ttft_ms, 500);
  EXPECT_EQ(*slo->tpot_ms, 50);
  EXPECT_EQ(*slo->e2el_ms, 2000);
  EXPECT_TRUE(ParseGoodput({}).value().empty());
  EXPECT_FALSE(ParseGoodput({"ttfb:5"}).ok());
  EXPECT_FALSE(ParseGoodput({"ttft:-1"}).ok());
  EXPECT_FALSE(ParseGoodput({"ttft"}).ok());
  EXPECT_FALSE(ParseGoodput({"ttft:1,ttft:2"}).ok());
}

// The command line as pagoda-bench parses it (bench_flags.h, bench_args.h).
struct ParsedArgs {
  BenchConfig config;
  std::optional<int> rc;  // ParseCommandLine's: nullopt = go on
};
ParsedArgs ParseBenchArgs(std::vector<std::string> in) {
  in.insert(in.begin(), "pagoda-bench");
  std::vector<char*> argv;
  for (std::string& s : in) argv.push_back(s.data());
  CLI::App app("test", "pagoda-bench");
  SetUpApp(&app);
  ParsedArgs out;
  AddBenchFlags(&app, &out.config);
  out.rc = ParseCommandLine(&app, static_cast<int>(argv.size()), argv.data());
  return out;
}

TEST(BenchArgsTest, DashesAndUnderscoresAndGoodputWords) {
  const ParsedArgs p =
      ParseBenchArgs({"--request-rate", "5.5", "--num_prompts=7", "--goodput", "ttft:1", "tpot:2",
                      "--json-out=a-b.json", "--goodput=e2el:3"});
  ASSERT_FALSE(p.rc.has_value());
  EXPECT_EQ(p.config.request_rate, 5.5);
  EXPECT_EQ(p.config.num_prompts, 7);
  EXPECT_EQ(p.config.json_out, "a-b.json");  // dashes in a value stay
  EXPECT_THAT(p.config.goodput, ElementsAre("ttft:1", "tpot:2", "e2el:3"));
}

TEST(BenchArgsTest, TenantRepeatsInOrder) {
  const ParsedArgs p =
      ParseBenchArgs({"--tenant", "name=a,key=1", "--num-prompts=3", "--tenant=name=b"});
  ASSERT_FALSE(p.rc.has_value());
  EXPECT_THAT(p.config.tenants, ElementsAre("name=a,key=1", "name=b"));
  EXPECT_EQ(p.config.num_prompts, 3);
}

TEST(BenchArgsTest, UnknownFlagsAndValuesExitTwo) {
  EXPECT_EQ(ParseBenchArgs({"--no-such-flag=1"}).rc, 2);
  EXPECT_EQ(ParseBenchArgs({"--backend", "http"}).rc, 2);
  EXPECT_EQ(ParseBenchArgs({"--dataset=sharegpt"}).rc, 2);
  EXPECT_EQ(ParseBenchArgs({"--concurrency=many"}).rc, 2);
  EXPECT_EQ(ParseBenchArgs({"stray"}).rc, 2);
  EXPECT_EQ(ParseBenchArgs({"--help"}).rc, 0);
}

TEST(DatasetTest, RandomPromptsShareThePrefixAndAvoidSpecialIds) {
  std::mt19937_64 rng(3);
  const std::vector<BenchRequest> d = MakeRandomDataset(
      {.num_prompts = 20, .input_len = 16, .output_len = 4, .prefix_len = 5, .vocab_size = 40},
      rng);
  ASSERT_EQ(d.size(), 20u);
  for (const BenchRequest& r : d) {
    ASSERT_EQ(r.prompt_token_ids.size(), 21u);
    EXPECT_EQ(r.max_tokens, 4);
    EXPECT_TRUE(std::equal(r.prompt_token_ids.begin(), r.prompt_token_ids.begin() + 5,
                           d[0].prompt_token_ids.begin()));
    for (int32_t id : r.prompt_token_ids) {
      EXPECT_GE(id, 3);
      EXPECT_LT(id, 40);
    }
  }
  EXPECT_NE(d[0].prompt_token_ids, d[1].prompt_token_ids);
}

TEST(DatasetTest, RangeRatioBoundsLengths) {
  std::mt19937_64 rng(4);
  const std::vector<BenchRequest> d = MakeRandomDataset({.num_prompts = 300,
                                                         .input_len = 10,
                                                         .output_len = 20,
                                                         .range_ratio = 0.5,
                                                         .vocab_size = 100},
                                                        rng);
  std::set<size_t> input_lens;
  std::set<int> output_lens;
  for (const BenchRequest& r : d) {
    input_lens.insert(r.prompt_token_ids.size());
    output_lens.insert(r.max_tokens);
  }
  EXPECT_EQ(*input_lens.begin(), 5u);  // 300 draws cover both ends of [5, 15]
  EXPECT_EQ(*input_lens.rbegin(), 15u);
  EXPECT_EQ(*output_lens.begin(), 10);
  EXPECT_EQ(*output_lens.rbegin(), 30);
}

TEST(DatasetTest, SharedPrefixGroupsRoundRobin) {
  std::mt19937_64 rng(5);
  const std::vector<BenchRequest> d = MakeSharedPrefixDataset({.num_prompts = 6,
                                                               .num_groups = 3,
                                                               .prefix_len = 8,
                                                               .suffix_len = 2,
                                                               .output_len = 7,
                                                               .vocab_size = 1000},
                                                              rng);
  ASSERT_EQ(d.size(), 6u);
  const auto prefix = [&](int i) {
    return std::vector<int32_t>(d[i].prompt_token_ids.begin(), d[i].prompt_token_ids.begin() + 8);
  };
  EXPECT_EQ(prefix(0), prefix(3));
  EXPECT_EQ(prefix(2), prefix(5));
  EXPECT_NE(prefix(0), prefix(1));
  EXPECT_EQ(d[4].prompt_token_ids.size(), 10u);
  EXPECT_EQ(d[4].max_tokens, 7);
}

TEST(DatasetTest, JsonlCyclesAndReportsBadLines) {
  const std::string dir = pagoda::testing::MakeTempDir();
  {
    std::ofstream out(dir + "/good.jsonl");
    out << R"({"prompt": "hello", "max_tokens": 3})"
        << "\n\n"
        << R"({"prompt": "world"})"
        << "\n";
  }
  absl::StatusOr<std::vector<BenchRequest>> d = LoadJsonlDataset(dir + "/good.jsonl", 3, 9);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 3u);
  EXPECT_EQ((*d)[0].prompt, "hello");
  EXPECT_EQ((*d)[0].max_tokens, 3);
  EXPECT_EQ((*d)[1].prompt, "world");
  EXPECT_EQ((*d)[1].max_tokens, 9);
  EXPECT_EQ((*d)[2].prompt, "hello");
  {
    std::ofstream out(dir + "/bad.jsonl");
    out << R"({"prompt": "ok"})"
        << "\n"
        << R"({"text": "x"})"
        << "\n";
  }
  absl::StatusOr<std::vector<BenchRequest>> bad = LoadJsonlDataset(dir + "/bad.jsonl", 1, 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("bad.jsonl:2"));
  EXPECT_EQ(LoadJsonlDataset(dir + "/missing.jsonl", 1, 1).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ReportTest, JsonHasVllmKeysAndPerRequestArrays) {
  const BenchmarkResult r = ComputeResult(ThreeRecords(), 2.0, GoodputSlo());
  RunInfo info;
  info.num_prompts = 3;
  info.request_rate = 5;
  const nlohmann::json j = ResultToJson(r, info);
  for (const char* key :
       {"completed", "failed", "errors", "total_input_tokens", "total_output_tokens", "duration",
        "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
        "max_output_tokens_per_s", "max_concurrent_requests", "request_send_rate", "ttfts", "itls",
        "input_lens", "output_lens", "e2els"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* metric : {"ttft", "tpot", "itl", "e2el"}) {
    for (const char* stat : {"mean", "median", "std", "p50", "p90", "p95", "p99"}) {
      const std::string key = std::string(stat) + "_" + metric + "_ms";
      EXPECT_TRUE(j.contains(key)) << key;
    }
  }
  EXPECT_EQ(j["errors"]["UNAVAILABLE"], 1);
  EXPECT_EQ(j["output_lens"], nlohmann::json({3, 3, 0}));
  EXPECT_EQ(j["itls"].size(), 3u);
  EXPECT_EQ(j["itls"][1].size(), 2u);
  EXPECT_TRUE(j["request_goodput"].is_null());
  EXPECT_EQ(j["request_rate"], 5.0);
}

TEST(ProgressTest, LineText) {
  EXPECT_EQ(ProgressReporter::Line(37, 100, 2.0, 2), "37/100 done, 18.5 req/s, 2 errors");
  EXPECT_EQ(ProgressReporter::Line(0, 5, 0.0, 1), "0/5 done, 0.0 req/s, 1 error");
}

TEST(ValidateConfigTest, NamesTheBadFlag) {
  BenchConfig c;
  c.server = "127.0.0.1:1";
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.range_ratio = 1.0;
  EXPECT_THAT(std::string(ValidateConfig(c).message()), ::testing::HasSubstr("--range-ratio"));
  c.range_ratio = 0;
  c.dataset = "file";
  EXPECT_THAT(std::string(ValidateConfig(c).message()), ::testing::HasSubstr("--dataset-path"));
  c.dataset = "random";
  c.request_rate = 0;
  EXPECT_THAT(std::string(ValidateConfig(c).message()), ::testing::HasSubstr("--request-rate"));
}

TEST(JainIndexTest, EqualSharesAreOneAndOneTakerIsOneOverN) {
  EXPECT_DOUBLE_EQ(*JainIndex({5, 5, 5}), 1.0);
  EXPECT_DOUBLE_EQ(*JainIndex({7, 0, 0, 0}), 0.25);
  // (1 + 2 + 3)^2 / (3 * (1 + 4 + 9)) = 36 / 42.
  EXPECT_DOUBLE_EQ(*JainIndex({1, 2, 3}), 36.0 / 42.0);
  EXPECT_DOUBLE_EQ(*JainIndex({4}), 1.0);
  EXPECT_FALSE(JainIndex({}).has_value());
  EXPECT_FALSE(JainIndex({0, 0}).has_value());
}

TEST(FairnessTest, WindowEndsAtTheFirstTenantsLastSendAndTokensAreDividedByWeight) {
  // Tenant a (weight 1) sends at 0 and 4; tenant b (weight 2) at 0, 1 and 2: the window is
  // [0, 2] (b's last send), bounds included.
  const std::vector<RequestRecord> a = {
      Record(0, {0.5, 1.0, 2.0}, {3, 1, 2}, 2.5, 6),  // all 6 tokens in the window
      Record(4, {4.5}, {5}, 5.0, 5)};                 // after the window
  const std::vector<RequestRecord> b = {
      Record(0, {0.5}, {4}, 0.6, 4), Record(1, {1.5, 2.0}, {4, 4}, 2.1, 8),
      Record(2, {2.5}, {9}, 3.0, 9, "UNAVAILABLE")};  // after the window; failed anyway
  const Fairness f = ComputeFairness({{.records = &a, .weight = 1}, {.records = &b, .weight = 2}},
                                     /*start=*/0);
  EXPECT_EQ(f.window_start, 0);
  EXPECT_EQ(f.window_end, 2);
  EXPECT_THAT(f.window_tokens, ElementsAre(6, 12));
  EXPECT_THAT(f.normalized, ElementsAre(6.0, 6.0));
  EXPECT_DOUBLE_EQ(*f.jain, 1.0);
  // Weights 1 and 1: x = (6, 12), J = 18^2 / (2 * 180) = 0.9.
  const Fairness equal = ComputeFairness({{.records = &a}, {.records = &b}}, 0);
  EXPECT_DOUBLE_EQ(*equal.jain, 0.9);
  // A tenant that sent nothing closes the window at the start: no tokens, no index.
  const std::vector<RequestRecord> none;
  const Fairness empty = ComputeFairness({{.records = &a}, {.records = &none}}, 0.25);
  EXPECT_EQ(empty.window_end, 0.25);
  EXPECT_THAT(empty.window_tokens, ElementsAre(0, 0));
  EXPECT_FALSE(empty.jain.has_value());
}

TEST(TenantSpecTest, ParsesFieldsTakesDefaultsAndNamesTheBadField) {
  const TenantSpec defaults = {.api_key = "global", .concurrency = 3, .num_prompts = 10};
  const absl::StatusOr<TenantSpec> a =
      ParseTenantSpec("name=a,key=K1,weight=2.5,concurrency=8", defaults);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->name, "a");
  EXPECT_EQ(a->api_key, "K1");
  EXPECT_EQ(a->weight, 2.5);
  EXPECT_EQ(a->concurrency, 8);
  EXPECT_TRUE(std::isinf(a->request_rate));
  EXPECT_EQ(a->num_prompts, 10);
  const absl::StatusOr<TenantSpec> b = ParseTenantSpec("name=b,rate=4,num-prompts=7", defaults);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->api_key, "global");
  EXPECT_EQ(b->weight, 1);
  EXPECT_EQ(b->concurrency, 3);
  EXPECT_EQ(b->request_rate, 4);
  EXPECT_EQ(b->num_prompts, 7);
  const auto error = [&](const std::string& spec) {
    return std::string(ParseTenantSpec(spec, defaults).status().message());
  };
  EXPECT_THAT(error("key=K"), ::testing::HasSubstr("name is required"));
  EXPECT_THAT(error("name=a,weight=0"), ::testing::HasSubstr("weight"));
  EXPECT_THAT(error("name=a,rate=-1"), ::testing::HasSubstr("rate"));
  EXPECT_THAT(error("name=a,concurrency=x"), ::testing::HasSubstr("concurrency"));
  EXPECT_THAT(error("name=a,colour=red"), ::testing::HasSubstr("unknown field 'colour'"));
  EXPECT_THAT(error("name=a,name=b"), ::testing::HasSubstr("name is given twice"));
  EXPECT_THAT(error("name=a,weight"), ::testing::HasSubstr("not KEY=VALUE"));
  // Keys may contain '='.
  EXPECT_EQ(ParseTenantSpec("name=a,key=ab==", defaults)->api_key, "ab==");
}

TEST(ValidateConfigTest, RejectsBadAndRepeatedTenants) {
  BenchConfig c;
  c.server = "127.0.0.1:1";
  c.tenants = {"name=a,key=1", "name=b,key=2,weight=2"};
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.tenants = {"name=a", "name=a"};
  EXPECT_THAT(std::string(ValidateConfig(c).message()), ::testing::HasSubstr("repeated"));
  c.tenants = {"name=a,weight=-2"};
  EXPECT_THAT(std::string(ValidateConfig(c).message()), ::testing::HasSubstr("--tenant"));
}

TEST(TenantReportTest, JsonHasOneEntryPerTenantAndTheIndex) {
  MultiTenantResult m;
  const std::vector<RequestRecord> a = {Record(0, {0.5}, {4}, 1.0, 4),
                                        Record(1, {1.5}, {2}, 2.0, 2)};
  m.tenants.push_back({.name = "a", .weight = 1, .result = ComputeResult(a, 1.0, {})});
  m.tenants.push_back({.name = "b", .weight = 2, .result = ComputeResult({}, 1.0, {})});
  m.fairness = ComputeFairness({{.records = &a}, {.records = &a, .weight = 2}}, 0);
  nlohmann::json j;
  AddTenantsToJson(m, &j);
  ASSERT_EQ(j["tenants"].size(), 2u);
  EXPECT_EQ(j["tenants"][0]["name"], "a");
  EXPECT_EQ(j["tenants"][0]["completed"], 2);
  EXPECT_EQ(j["tenants"][0]["total_output_tokens"], 6);
  EXPECT_EQ(j["tenants"][0]["window_output_tokens"], 4);  // the window is [0, 1]
  EXPECT_EQ(j["tenants"][1]["weight"], 2.0);
  EXPECT_EQ(j["tenants"][1]["window_output_tokens_per_weight"], 2.0);
  EXPECT_DOUBLE_EQ(j["fairness"]["jain_index"].get<double>(), 0.9);  // x = (4, 2)
  EXPECT_EQ(j["fairness"]["window_seconds"], 1.0);
}

}  // namespace
}  // namespace pagoda::bench
