// pagoda-bench as a process: against an in-process fake Generation service (exact error
// accounting, API keys, duration bound, open-loop rate) and against a real `pagoda serve`
// daemon on the tiny preset (token totals checked against the daemon's /metrics).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagoda/v1/generation.grpc.pb.h"
#include "tests/daemon_process.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::pagoda::testing::BinDir;
using ::pagoda::testing::MakeTempDir;

// A port nobody listens on right now: bound to port 0, then released.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

struct BenchRun {
  int exit_code = -1;
  std::string stdout_text;
  std::string stderr_text;
  nlohmann::json json;
};

// Runs pagoda-bench with `flags` (plus --server and --json-out) to completion.
BenchRun RunBench(const std::string& server, std::vector<std::string> flags) {
  const std::string dir = MakeTempDir();
  std::vector<std::string> args = {BinDir() + "/pagoda-bench", "--server", server, "--json-out",
                                   dir + "/result.json"};
  args.insert(args.end(), flags.begin(), flags.end());
  BenchRun run;
  run.exit_code = pagoda::testing::WaitForExit(
      pagoda::testing::SpawnProcess(args, dir + "/stdout", dir + "/stderr"));
  run.stdout_text = pagoda::testing::ReadFileOrDie(dir + "/stdout");
  run.stderr_text = pagoda::testing::ReadFileOrDie(dir + "/stderr");
  if (std::filesystem::exists(dir + "/result.json")) {
    run.json = nlohmann::json::parse(pagoda::testing::ReadFileOrDie(dir + "/result.json"));
  }
  return run;
}

// Per-request invariants every successful run must hold.
void ExpectConsistent(const nlohmann::json& j) {
  const size_t n = j["ttfts"].size();
  ASSERT_EQ(j["e2els"].size(), n);
  ASSERT_EQ(j["output_lens"].size(), n);
  ASSERT_EQ(j["input_lens"].size(), n);
  ASSERT_EQ(j["itls"].size(), n);
  long long output_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_LE(j["ttfts"][i].get<double>(), j["e2els"][i].get<double>()) << "request " << i;
    output_sum += j["output_lens"][i].get<long long>();
  }
  EXPECT_EQ(j["total_output_tokens"].get<long long>(), output_sum);
  EXPECT_EQ(j["total_streamed_output_tokens"], j["total_output_tokens"]);
}

// A Generation service that streams `max_tokens` tokens in messages of 1 and 2 tokens,
// fails every `fail_every`-th Generate with RESOURCE_EXHAUSTED, checks an API key, and
// counts the Generate calls per authorization value.
class FakeGeneration final : public v1::Generation::Service {
 public:
  FakeGeneration(int fail_every, std::string api_key, std::chrono::milliseconds token_delay)
      : fail_every_(fail_every), api_key_(std::move(api_key)), token_delay_(token_delay) {}

  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest*,
                            v1::ModelInfo* info) override {
    if (!Authorized(*context)) return {grpc::StatusCode::UNAUTHENTICATED, "bad key"};
    info->set_model("fake");
    info->set_vocab_size(64);
    info->set_context_length(1024);
    return grpc::Status::OK;
  }

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    if (!Authorized(*context)) return {grpc::StatusCode::UNAUTHENTICATED, "bad key"};
    const int call = calls_.fetch_add(1) + 1;
    {
      const auto it = context->client_metadata().find("authorization");
      std::lock_guard<std::mutex> lock(by_key_mu_);
      ++by_key_[it == context->client_metadata().end()
                    ? ""
                    : std::string(it->second.data(), it->second.size())];
    }
    if (request->has_parse_special()) {
      ++(request->parse_special() ? parse_special_true_ : parse_special_false_);
    }
    if (fail_every_ > 0 && call % fail_every_ == 0) {
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full"};
    }
    v1::GenerateResponse first;
    first.mutable_usage()->set_prompt_tokens(request->prompt_token_ids_size());
    writer->Write(first);
    int sent = 0;
    for (int chunk = 1; sent < request->max_tokens(); chunk = 3 - chunk) {
      std::this_thread::sleep_for(token_delay_);
      v1::GenerateResponse r;
      for (int k = 0; k < chunk && sent < request->max_tokens(); ++k, ++sent) {
        r.add_token_ids(5 + sent);
      }
      writer->Write(r);
    }
    v1::GenerateResponse last;
    last.set_finish_reason("length");
    last.mutable_usage()->set_prompt_tokens(request->prompt_token_ids_size());
    last.mutable_usage()->set_completion_tokens(sent);
    writer->Write(last);
    tokens_ += sent;
    return grpc::Status::OK;
  }

  long long tokens() const { return tokens_.load(); }
  // Generate calls by their authorization metadata ("" when absent).
  std::map<std::string, int> calls_by_key() const {
    std::lock_guard<std::mutex> lock(by_key_mu_);
    return by_key_;
  }
  // Requests that set parse_special true / false.
  int parse_special_true() const { return parse_special_true_.load(); }
  int parse_special_false() const { return parse_special_false_.load(); }

 private:
  bool Authorized(const grpc::ServerContext& context) const {
    if (api_key_.empty()) return true;
    const auto it = context.client_metadata().find("authorization");
    return it != context.client_metadata().end() &&
           std::string(it->second.data(), it->second.size()) == "Bearer " + api_key_;
  }

  const int fail_every_;
  const std::string api_key_;
  const std::chrono::milliseconds token_delay_;
  std::atomic<int> calls_{0};
  std::atomic<long long> tokens_{0};
  std::atomic<int> parse_special_true_{0};
  std::atomic<int> parse_special_false_{0};
  mutable std::mutex by_key_mu_;
  std::map<std::string, int> by_key_;
};

class FakeServer {
 public:
  explicit FakeServer(int fail_every = 0, std::string api_key = "",
                      std::chrono::milliseconds token_delay = std::chrono::milliseconds(1))
      : service_(fail_every, std::move(api_key), token_delay) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeServer() { server_->Shutdown(std::chrono::system_clock::now()); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  const FakeGeneration& service() const { return service_; }

 private:
  FakeGeneration service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST(BenchFakeServerTest, CountsFailuresByCodeAndTokensExactly) {
  FakeServer server(/*fail_every=*/5);
  const BenchRun run = RunBench(
      server.address(), {"--num-prompts=20", "--concurrency=4", "--input-len=8", "--output-len=6"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.json["completed"], 16);
  EXPECT_EQ(run.json["failed"], 4);
  EXPECT_EQ(run.json["errors"], nlohmann::json({{"RESOURCE_EXHAUSTED", 4}}));
  EXPECT_EQ(run.json["total_output_tokens"].get<long long>(), server.service().tokens());
  EXPECT_EQ(run.json["total_output_tokens"], 16 * 6);
  EXPECT_EQ(run.json["total_input_tokens"], 16 * 8);
  ExpectConsistent(run.json);
  // Messages of 1, 2, 1, 2 tokens: 5 inter-token gaps for 6 tokens.
  for (size_t i = 0; i < run.json["itls"].size(); ++i) {
    if (run.json["statuses"][i] == "OK") {
      EXPECT_EQ(run.json["itls"][i].size(), 5u);
    }
  }
  EXPECT_LE(run.json["peak_in_flight_requests"].get<int>(), 4);
  EXPECT_THAT(run.stdout_text, ::testing::HasSubstr("Serving Benchmark Result"));
  EXPECT_THAT(run.stdout_text, ::testing::HasSubstr("RESOURCE_EXHAUSTED"));
}

TEST(BenchFakeServerTest, WarmupIsNotCountedAndGoodputIsReported) {
  FakeServer server;
  const BenchRun run = RunBench(
      server.address(), {"--num-prompts=10", "--warmup=3", "--concurrency=2", "--input-len=4",
                         "--output-len=3", "--goodput", "ttft:60000", "e2el:60000"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.json["completed"], 10);
  EXPECT_EQ(server.service().tokens(), 13 * 3);
  EXPECT_EQ(run.json["goodput_fraction"], 1.0);
  EXPECT_GT(run.json["request_goodput"].get<double>(), 0.0);
}

TEST(BenchFakeServerTest, ParseSpecialFlagSetsTheRequests) {
  FakeServer by_default;
  ASSERT_EQ(RunBench(by_default.address(), {"--num-prompts=3", "--input-len=4", "--output-len=2"})
                .exit_code,
            0);
  EXPECT_EQ(by_default.service().parse_special_true(), 3);
  EXPECT_EQ(by_default.service().parse_special_false(), 0);
  FakeServer plain;
  ASSERT_EQ(RunBench(plain.address(), {"--num-prompts=3", "--input-len=4", "--output-len=2",
                                       "--parse-special=false"})
                .exit_code,
            0);
  EXPECT_EQ(plain.service().parse_special_true(), 0);
  EXPECT_EQ(plain.service().parse_special_false(), 3);
}

TEST(BenchFakeServerTest, ApiKeyIsSentAndAWrongOneFailsAtStart) {
  FakeServer server(/*fail_every=*/0, "sesame");
  const BenchRun good = RunBench(
      server.address(), {"--num-prompts=3", "--api-key=sesame", "--input-len=4", "--output-len=2"});
  ASSERT_EQ(good.exit_code, 0) << good.stderr_text;
  EXPECT_EQ(good.json["completed"], 3);
  const BenchRun bad = RunBench(server.address(), {"--num-prompts=3", "--api-key=wrong"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.stderr_text, ::testing::HasSubstr("UNAUTHENTICATED"));
}

TEST(BenchFakeServerTest, TenantsSendTheirOwnRequestsAndAreReportedApart) {
  FakeServer server;
  const BenchRun run =
      RunBench(server.address(), {"--input-len=4", "--output-len=3", "--tenant",
                                  "name=a,key=ka,concurrency=2,num-prompts=6", "--tenant",
                                  "name=b,key=kb,weight=2,num-prompts=4,rate=50"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.json["completed"], 10);
  EXPECT_EQ(run.json["failed"], 0);
  EXPECT_EQ(run.json["total_output_tokens"], 10 * 3);
  EXPECT_EQ(server.service().tokens(), 10 * 3);
  EXPECT_EQ(server.service().calls_by_key(),
            (std::map<std::string, int>{{"Bearer ka", 6}, {"Bearer kb", 4}}));
  ASSERT_EQ(run.json["tenants"].size(), 2u);
  EXPECT_EQ(run.json["tenants"][0]["name"], "a");
  EXPECT_EQ(run.json["tenants"][0]["completed"], 6);
  EXPECT_EQ(run.json["tenants"][0]["total_output_tokens"], 18);
  EXPECT_EQ(run.json["tenants"][1]["name"], "b");
  EXPECT_EQ(run.json["tenants"][1]["weight"], 2.0);
  EXPECT_EQ(run.json["tenants"][1]["completed"], 4);
  EXPECT_TRUE(run.json["fairness"].contains("jain_index"));
  EXPECT_THAT(run.stdout_text, ::testing::HasSubstr("Tenant a (weight 1)"));
  EXPECT_THAT(run.stdout_text, ::testing::HasSubstr("Jain's index"));
}

TEST(BenchFakeServerTest, DurationBoundsTheRun) {
  FakeServer server(0, "", std::chrono::milliseconds(50));  // each request takes ~0.2 s
  const BenchRun run = RunBench(server.address(), {"--num-prompts=1000", "--concurrency=2",
                                                   "--duration=1", "--output-len=4"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_GE(run.json["completed"].get<int>(), 1);
  EXPECT_LT(run.json["completed"].get<int>(), 1000);
  EXPECT_EQ(run.json["failed"], 0);
}

TEST(BenchFakeServerTest, DeadlinesAreCountedNotFatal) {
  FakeServer server(0, "", std::chrono::milliseconds(50));  // each request takes ~1 s
  const BenchRun run = RunBench(server.address(), {"--num-prompts=4", "--concurrency=4",
                                                   "--output-len=20", "--request-timeout=0.2"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.json["completed"], 0);
  EXPECT_EQ(run.json["errors"], nlohmann::json({{"DEADLINE_EXCEEDED", 4}}));
  EXPECT_EQ(run.json["total_output_tokens"], 0);
  EXPECT_THAT(run.stdout_text, ::testing::HasSubstr("DEADLINE_EXCEEDED"));
}

// The open loop's schedule, checked without a clock: the arrival times themselves are
// unit-tested (ArrivalScheduleTest); here the client must wait for them. 200 requests at
// 100/s: the last is due 2 s after the start and no sleep returns early, so it goes out at
// least 1 s after the first unless the first itself is over 1 s late. Sending without
// waiting would put them all within milliseconds.
void ExpectPacedSends(const nlohmann::json& j) {
  EXPECT_EQ(j["request_rate"].get<double>(), 100.0);
  const auto& sends = j["send_times"];
  ASSERT_EQ(sends.size(), 200u);
  double last = 0;
  for (const auto& t : sends) last = std::max(last, t.get<double>());
  EXPECT_GE(last, 1.0);
}

TEST(BenchFakeServerTest, OpenLoopWaitsForTheSchedule) {
  FakeServer server;
  const BenchRun run = RunBench(server.address(), {"--num-prompts=200", "--request-rate=100",
                                                   "--seed=1", "--input-len=8", "--output-len=2"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.json["completed"], 200);
  ExpectPacedSends(run.json);
}

TEST(BenchProcessTest, BadFlagsAndUnreachableServerExitNonZero) {
  EXPECT_EQ(RunBench("127.0.0.1:1", {"--dataset=nope"}).exit_code, 2);
  EXPECT_EQ(RunBench("127.0.0.1:1", {"--goodput", "ttfb:1"}).exit_code, 2);
  EXPECT_EQ(RunBench("127.0.0.1:1", {"--tls-ca=/nonexistent/ca.pem"}).exit_code, 2);
  const BenchRun unreachable = RunBench(absl::StrCat("127.0.0.1:", FreePort()), {});
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_THAT(unreachable.stderr_text, ::testing::HasSubstr("UNAVAILABLE"));
}

// A `pagoda serve` daemon on a fresh tiny-preset model (vocab 512, context 2048).
class BenchDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = MakeTempDir();
    const std::string model = dir + "/tiny.gguf";
    const int made = pagoda::testing::WaitForExit(pagoda::testing::SpawnProcess(
        {BinDir() + "/pagoda", "make-model", "--preset", "tiny", "--out", model}, dir + "/make.out",
        dir + "/make.err"));
    ASSERT_EQ(made, 0) << pagoda::testing::ReadFileOrDie(dir + "/make.err");
    ASSERT_TRUE(daemon_.Start({"--model", model}));
  }

  // The daemon's pagoda:generation_tokens_total counter; -1 when unreadable.
  long long GeneratedTokens() const {
    return static_cast<long long>(
        pagoda::testing::MetricValue(pagoda::testing::HttpGet(daemon_.metrics_port(), "/metrics"),
                                     "pagoda:generation_tokens_total"));
  }

  pagoda::testing::DaemonProcess daemon_;
};

TEST_F(BenchDaemonTest, ClosedLoopCountsMatchTheServer) {
  const long long before = GeneratedTokens();
  ASSERT_GE(before, 0);
  const BenchRun run =
      RunBench(daemon_.address(), {"--num-prompts=100", "--concurrency=8", "--input-len=32",
                                   "--output-len=16", "--ignore-eos", "--seed=3"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  const long long after = GeneratedTokens();
  EXPECT_EQ(run.json["completed"], 100);
  EXPECT_EQ(run.json["failed"], 0);
  EXPECT_EQ(run.json["total_output_tokens"].get<long long>(), after - before);
  // --ignore-eos fixes every length at max_tokens.
  EXPECT_EQ(run.json["output_lens"], nlohmann::json(std::vector<int>(100, 16)));
  EXPECT_EQ(run.json["input_lens"], nlohmann::json(std::vector<int>(100, 32)));
  EXPECT_EQ(run.json["total_input_tokens"], 100 * 32);
  ExpectConsistent(run.json);
  EXPECT_LE(run.json["peak_in_flight_requests"].get<int>(), 8);
  for (const char* key : {"completed",
                          "total_input_tokens",
                          "total_output_tokens",
                          "duration",
                          "request_throughput",
                          "request_goodput",
                          "output_throughput",
                          "total_token_throughput",
                          "mean_ttft_ms",
                          "median_ttft_ms",
                          "std_ttft_ms",
                          "p50_ttft_ms",
                          "p90_ttft_ms",
                          "p95_ttft_ms",
                          "p99_ttft_ms",
                          "mean_tpot_ms",
                          "p99_tpot_ms",
                          "mean_itl_ms",
                          "p99_itl_ms",
                          "mean_e2el_ms",
                          "p99_e2el_ms",
                          "max_output_tokens_per_s",
                          "max_concurrent_requests",
                          "failed",
                          "errors",
                          "ttfts",
                          "itls",
                          "input_lens",
                          "output_lens",
                          "e2els",
                          "request_send_rate"}) {
    EXPECT_TRUE(run.json.contains(key)) << key;
  }
  std::printf("%s", run.stdout_text.c_str());
}

TEST_F(BenchDaemonTest, OpenLoopWaitsForTheSchedule) {
  const BenchRun run = RunBench(daemon_.address(), {"--num-prompts=200", "--request-rate=100",
                                                    "--input-len=8", "--output-len=4", "--seed=5"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.json["completed"].get<int>() + run.json["failed"].get<int>(), 200);
  ExpectPacedSends(run.json);
  ExpectConsistent(run.json);
}

}  // namespace
}  // namespace pagoda
