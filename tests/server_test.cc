// The daemon over real gRPC on a loopback port: streamed output equals the golden and
// offline outputs, 64 concurrent streams, cancellation, deadlines, validation, admission
// control, metrics and health.
#include "server/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/generation_client.h"
#include "common/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "model/tokenizer.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"
#include "tests/daemon_process.h"
#include "tests/engine_test_util.h"
#include "tests/step_gate.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

struct Streamed {
  grpc::Status status;
  std::string request_id;
  int32_t first_prompt_tokens = -1;
  std::vector<int32_t> token_ids;
  std::string text;
  std::string finish_reason;
  v1::Usage usage;
  int messages = 0;
};

// Keeps every message logged (payload only), for assertions on the access log.
class CaptureSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

using ::pagoda::testing::StepGate;

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(engine::EngineConfig config = {},
                   absl::Duration drain_timeout = absl::Seconds(30),
                   int64_t max_unsent_bytes_per_stream = int64_t{1} << 20) {
    engine_ = testing::StoriesEngine(config);
    ASSERT_NE(engine_, nullptr);
    auto server =
        server::Server::Start({.host = "127.0.0.1",
                               .port = 0,
                               .metrics_port = 0,
                               .model_name = "stories260K",
                               .drain_timeout = drain_timeout,
                               .max_unsent_bytes_per_stream = max_unsent_bytes_per_stream},
                              engine_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = *client::MakeChannel({.address = absl::StrCat("127.0.0.1:", server_->port())});
    client_ = std::make_unique<client::GenerationClient>(channel_, "");
  }

  void TearDown() override {
    gate_.Set(true);  // a test that failed with the gate closed must not hang here
    server_.reset();
    if (engine_) engine_->Stop();
    if (log_) {  // nothing logs any more
      auto& sinks = spdlog::default_logger()->sinks();
      sinks.erase(std::remove(sinks.begin(), sinks.end(), log_), sinks.end());
    }
  }

  // Captures the default logger's messages from now until TearDown.
  void CaptureLog() {
    log_ = std::make_shared<CaptureSink>();
    spdlog::default_logger()->sinks().push_back(log_);
  }

  // Polls the captured log until `n` messages start with `prefix`; returns those, sorted.
  std::vector<std::string> WaitForLogLines(const std::string& prefix, size_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (true) {
      std::vector<std::string> found;
      for (const std::string& line : log_->Lines()) {
        if (line.rfind(prefix, 0) == 0) found.push_back(line);
      }
      if (found.size() >= n || absl::Now() >= deadline) {
        std::sort(found.begin(), found.end());
        return found;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  Streamed Generate(const v1::GenerateRequest& request,
                    const std::function<void(grpc::ClientContext*)>& setup = nullptr,
                    const std::function<void(const v1::GenerateResponse&)>& each = nullptr) {
    Streamed s;
    s.status = client_->Generate(
        request,
        [&](const v1::GenerateResponse& r) {
          if (s.messages++ == 0) {
            s.request_id = r.request_id();
            s.first_prompt_tokens = r.usage().prompt_tokens();
          }
          s.token_ids.insert(s.token_ids.end(), r.token_ids().begin(), r.token_ids().end());
          s.text += r.text();
          if (!r.finish_reason().empty()) {
            s.finish_reason = r.finish_reason();
            s.usage = r.usage();
          }
          if (each) each(r);
        },
        setup);
    return s;
  }

  double Metric(const std::string& name) {
    return testing::MetricValue(testing::HttpGet(server_->metrics_port(), "/metrics"), name);
  }

  // Polls /metrics until every KV block is free.
  bool WaitAllBlocksFree() {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      const std::string m = testing::HttpGet(server_->metrics_port(), "/metrics");
      const double total = testing::MetricValue(m, "pagoda:kv_cache_total_blocks");
      if (total > 0 && testing::MetricValue(m, "pagoda:kv_cache_free_blocks") == total) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

  StepGate gate_;  // outlives the engine, which may call it until stopped
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<client::GenerationClient> client_;
  std::shared_ptr<CaptureSink> log_;
};

nlohmann::json GoldenCases() {
  return nlohmann::json::parse(
             testing::ReadFileOrDie(testing::ModelPath("stories260K.golden.json")))
      .at("cases");
}

v1::GenerateRequest Greedy(const std::string& prompt, int32_t max_tokens) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.set_max_tokens(max_tokens);
  r.set_temperature(0);
  return r;
}

TEST_F(ServerTest, StreamedGreedyOutputEqualsGoldenAndOffline) {
  StartServer({.kv_cache_dtype = "f32"});  // as the references were made
  for (const auto& c : GoldenCases()) {
    v1::GenerateRequest r;
    for (int id : c.at("prompt_token_ids")) r.add_prompt_token_ids(id);
    r.set_max_tokens(64);
    r.set_temperature(0);
    r.set_request_id("golden-1");
    const Streamed s = Generate(r);
    ASSERT_TRUE(s.status.ok()) << s.status.error_message();
    EXPECT_EQ(s.request_id, "golden-1");
    EXPECT_EQ(s.first_prompt_tokens, static_cast<int>(c.at("prompt_token_ids").size()));
    EXPECT_EQ(s.token_ids, c.at("output_token_ids").get<std::vector<int32_t>>());
    EXPECT_EQ(s.text, c.at("output_text").get<std::string>());
    EXPECT_EQ(s.finish_reason, "length");
    EXPECT_EQ(s.usage.prompt_tokens(), s.first_prompt_tokens);
    EXPECT_EQ(s.usage.completion_tokens(), 64);
    EXPECT_GE(s.messages, 2);  // the first message (id, prompt tokens) stands alone
    // The same request offline, in-process.
    const engine::CollectedOutput offline = testing::RunOne(
        *engine_,
        testing::GreedyRequest(c.at("prompt_token_ids").get<std::vector<int32_t>>(), 64, false));
    EXPECT_EQ(s.token_ids, offline.token_ids);
  }
  const Streamed text = Generate(Greedy("Once upon a time", 64));
  EXPECT_EQ(text.token_ids, GoldenCases()[0].at("output_token_ids").get<std::vector<int32_t>>());
  EXPECT_EQ(text.request_id.rfind("req-", 0), 0u);  // generated when not given
}

TEST_F(ServerTest, SixtyFourConcurrentStreamsThenEveryBlockIsFree) {
  StartServer();
  const auto cases = GoldenCases();
  std::vector<Streamed> results(64);
  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back([&, i] {
      v1::GenerateRequest r;
      for (int id : cases[i % 2].at("prompt_token_ids")) r.add_prompt_token_ids(id);
      r.set_max_tokens(64);
      r.set_temperature(0);
      results[i] = Generate(r);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(results[i].status.ok()) << i << ": " << results[i].status.error_message();
    EXPECT_EQ(results[i].token_ids, cases[i % 2].at("output_token_ids").get<std::vector<int32_t>>())
        << i;
  }
  EXPECT_TRUE(WaitAllBlocksFree());
  EXPECT_EQ(Metric("pagoda:generation_tokens_total"), 64 * 64);
  EXPECT_EQ(Metric("pagoda:num_requests_running"), 0);
}

// The engine is held after its first step until the call has ended, so the cancel always
// reaches a running request, however slow the machine.
TEST_F(ServerTest, CancelMidStreamFreesBlocksAndCounts) {
  gate_.Set(false);
  StartServer({.step_observer = &gate_});
  grpc::ClientContext* ctx = nullptr;
  int chunks = 0;
  v1::GenerateRequest r = Greedy("Once upon a time", 1900);
  r.set_ignore_eos(true);
  const Streamed s = Generate(
      r, [&](grpc::ClientContext* c) { ctx = c; },
      [&](const v1::GenerateResponse& resp) {
        if (!resp.token_ids().empty() && ++chunks == 1) ctx->TryCancel();
      });
  gate_.Set(true);
  EXPECT_EQ(s.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(s.token_ids.size(), 1900u);
  EXPECT_TRUE(WaitAllBlocksFree());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Metric("pagoda:request_cancelled_total") < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(Metric("pagoda:request_cancelled_total"), 1);
  // The engine thread counts the abort after it frees the blocks: wait for it too.
  while (engine_->Stats().num_aborted < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(engine_->Stats().num_aborted, 1);
}

// The engine is held at the end of its first step, so the request is accepted (its first
// message arrives) and still running when the deadline passes, whatever the machine's load.
// (A 30 ms deadline used to expire, on a loaded CI machine, before the call reached the
// server: then nothing was aborted.)
TEST_F(ServerTest, ExpiredDeadlineAbortsAndFrees) {
  gate_.Set(false);
  StartServer({.step_observer = &gate_});
  v1::GenerateRequest r = Greedy("Once upon a time", 1900);
  r.set_ignore_eos(true);
  const Streamed s = Generate(r, [](grpc::ClientContext* c) {
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  gate_.Set(true);
  EXPECT_EQ(s.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_FALSE(s.request_id.empty());  // accepted before the deadline
  EXPECT_EQ(s.first_prompt_tokens, 5);
  EXPECT_LT(s.token_ids.size(), 1900u);
  EXPECT_TRUE(WaitAllBlocksFree());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (engine_->Stats().num_aborted < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(engine_->Stats().num_aborted, 1);
  EXPECT_EQ(engine_->Stats().num_submitted, 1);
}

// Regression (hardening): a second daemon bound the same ports (SO_REUSEPORT) and silently
// took traffic. Now its start fails, naming the address, and the first one keeps serving.
TEST_F(ServerTest, ASecondServerCannotBindTheSamePorts) {
  StartServer();
  auto other_engine = testing::StoriesEngine();
  ASSERT_NE(other_engine, nullptr);
  auto same_grpc = server::Server::Start(
      {.host = "127.0.0.1", .port = server_->port(), .metrics_port = 0}, other_engine.get());
  EXPECT_EQ(same_grpc.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(same_grpc.status().message(),
            absl::StrCat("cannot listen on 127.0.0.1:", server_->port()));
  auto same_metrics = server::Server::Start(
      {.host = "127.0.0.1", .port = 0, .metrics_port = server_->metrics_port()},
      other_engine.get());
  EXPECT_EQ(same_metrics.status().code(), absl::StatusCode::kUnavailable);
  const Streamed ok = Generate(Greedy("Once upon a time", 5));
  ASSERT_TRUE(ok.status.ok());
  EXPECT_EQ(ok.token_ids, (std::vector<int32_t>{432, 383, 286, 261, 376}));
}

TEST_F(ServerTest, InvalidInputsGetTheirCodesAndTheDaemonStillServes) {
  StartServer();
  struct Case {
    std::string name;
    std::function<void(v1::GenerateRequest&)> mutate;
    grpc::StatusCode code;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"empty prompt", [](auto& r) { r.clear_prompt(); }, grpc::INVALID_ARGUMENT, "prompt"},
      {"too long", [](auto& r) { r.set_prompt(std::string(2100, 'a')); }, grpc::INVALID_ARGUMENT,
       "prompt"},
      {"max_tokens 0", [](auto& r) { r.set_max_tokens(0); }, grpc::INVALID_ARGUMENT, "max_tokens"},
      {"max_tokens < 0", [](auto& r) { r.set_max_tokens(-5); }, grpc::INVALID_ARGUMENT,
       "max_tokens"},
      {"past context", [](auto& r) { r.set_max_tokens(2045); }, grpc::INVALID_ARGUMENT,
       "max_tokens"},
      {"temperature", [](auto& r) { r.set_temperature(-1); }, grpc::INVALID_ARGUMENT,
       "temperature"},
      {"top_p 0", [](auto& r) { r.set_top_p(0); }, grpc::INVALID_ARGUMENT, "top_p"},
      {"top_p > 1", [](auto& r) { r.set_top_p(1.01f); }, grpc::INVALID_ARGUMENT, "top_p"},
      {"top_k", [](auto& r) { r.set_top_k(-2); }, grpc::INVALID_ARGUMENT, "top_k"},
      {"utf8", [](auto& r) { r.set_prompt("caf\xc3"); }, grpc::INVALID_ARGUMENT, "prompt"},
      {"stop utf8", [](auto& r) { r.add_stop(std::string(1, static_cast<char>(0xff))); },
       grpc::INVALID_ARGUMENT, "stop[0]"},
      {"vocab",
       [](auto& r) {
         r.clear_prompt();
         r.add_prompt_token_ids(1);
         r.add_prompt_token_ids(9999);
       },
       grpc::INVALID_ARGUMENT, "prompt_token_ids"},
      {"both prompts", [](auto& r) { r.add_prompt_token_ids(1); }, grpc::INVALID_ARGUMENT,
       "prompt"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest r = Greedy("Once upon a time", 8);
    c.mutate(r);
    const Streamed s = Generate(r);
    EXPECT_EQ(s.status.error_code(), c.code) << c.name << ": " << s.status.error_message();
    EXPECT_EQ(s.status.error_message().rfind(c.field + ":", 0), 0u)
        << c.name << ": " << s.status.error_message();
    EXPECT_EQ(s.messages, 0) << c.name;
  }
  v1::DetokenizeRequest bad;
  bad.add_token_ids(70000);
  v1::DetokenizeResponse unused;
  EXPECT_EQ(client_->Detokenize(bad, &unused).error_code(), grpc::INVALID_ARGUMENT);
  const Streamed ok = Generate(Greedy("Once upon a time", 5));
  ASSERT_TRUE(ok.status.ok());
  EXPECT_EQ(ok.token_ids, (std::vector<int32_t>{432, 383, 286, 261, 376}));
  EXPECT_EQ(Metric("pagoda:request_failure_total{tenant=\"anonymous\",code=\"INVALID_ARGUMENT\"}"),
            static_cast<double>(cases.size()));
}

TEST_F(ServerTest, AnonymousTenantIsLabeledAndEachRequestLogsOneEscapedAccessLine) {
  CaptureLog();
  StartServer();
  // A client-chosen id with a control character is refused by the validator, and its
  // access line escapes it: it cannot forge a second log line.
  v1::GenerateRequest forged = Greedy("Once upon a time", 5);
  forged.set_request_id("r1\naccess tenant=\"other\"");
  const Streamed refused = Generate(forged);
  EXPECT_EQ(refused.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(refused.status.error_message(), "request_id: contains a control character");
  v1::GenerateRequest r = Greedy("Once upon a time", 5);
  r.set_request_id("r1");
  const Streamed ok = Generate(r);
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  ASSERT_EQ(ok.token_ids.size(), 5u);
  v1::GenerateRequest bad = Greedy("Once upon a time", 5);
  bad.set_request_id("bad-1");
  bad.set_temperature(-1);
  EXPECT_EQ(Generate(bad).status.error_code(), grpc::INVALID_ARGUMENT);

  const std::vector<std::string> lines = WaitForLogLines("access ", 3);
  ASSERT_EQ(lines.size(), 3u);
  const std::string& rejected = lines[0];  // request_id="bad-1" sorts first
  const std::string& done = lines[1];      // then "r1" and the escaped "r1\n..."
  EXPECT_EQ(lines[2].rfind("access tenant=\"anonymous\" request_id=\"r1\\naccess "
                           "tenant=\\\"other\\\"\" status=INVALID_ARGUMENT ",
                           0),
            0u)
      << lines[2];
  EXPECT_EQ(done.rfind(absl::StrCat("access tenant=\"anonymous\" request_id=\"r1\" status=OK "
                                    "finish_reason=length prompt_tokens=",
                                    ok.first_prompt_tokens,
                                    " completion_tokens=5 cached_tokens=0 queue_ms="),
                       0),
            0u)
      << done;
  EXPECT_EQ(done.find("ttft_ms=-"), std::string::npos) << done;
  EXPECT_EQ(rejected.rfind("access tenant=\"anonymous\" request_id=\"bad-1\" "
                           "status=INVALID_ARGUMENT finish_reason=- prompt_tokens=0 "
                           "completion_tokens=0 cached_tokens=0 queue_ms=- ttft_ms=- e2e_ms=",
                           0),
            0u)
      << rejected;
  EXPECT_NE(rejected.find(" error=\"temperature:"), std::string::npos) << rejected;
  for (const std::string& line : log_->Lines()) {
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    EXPECT_EQ(line.find("Once upon"), std::string::npos) << line;  // no prompt text
  }

  const std::string m = testing::HttpGet(server_->metrics_port(), "/metrics");
  const auto value = [&](const std::string& sample) { return testing::MetricValue(m, sample); };
  EXPECT_EQ(value("pagoda:request_success_total{tenant=\"anonymous\",finished_reason=\"length\"}"),
            1);
  EXPECT_EQ(value("pagoda:request_failure_total{tenant=\"anonymous\",code=\"INVALID_ARGUMENT\"}"),
            2);
  EXPECT_EQ(value("pagoda:prompt_tokens_total{tenant=\"anonymous\"}"), ok.first_prompt_tokens);
  EXPECT_EQ(value("pagoda:generation_tokens_total{tenant=\"anonymous\"}"), 5);
  EXPECT_EQ(value("pagoda:request_cancelled_total{tenant=\"anonymous\"}"), 0);
  EXPECT_EQ(value("pagoda:time_to_first_token_seconds_count{tenant=\"anonymous\"}"), 1);
  EXPECT_EQ(value("pagoda:e2e_request_latency_seconds_count{tenant=\"anonymous\"}"), 1);
  EXPECT_EQ(value("pagoda:request_queue_time_seconds_count{tenant=\"anonymous\"}"), 1);
  // One gap per token after the first (one token per engine step).
  EXPECT_EQ(value("pagoda:inter_token_latency_seconds_count{tenant=\"anonymous\"}"), 4);
  // The unlabeled gauges the gateway's endpoint picker and the autoscaler read.
  EXPECT_EQ(value("pagoda:num_requests_waiting"), 0);
  EXPECT_GE(value("pagoda:kv_cache_usage_perc"), 0);
  EXPECT_EQ(
      value(absl::StrCat("pagoda:cache_config_info{block_size=\"", engine_->config().block_size,
                         "\",num_gpu_blocks=\"", engine_->Stats().num_blocks, "\"}")),
      1);
}

// The engine is held after the running request's first step until the refusal, so that
// request is still running and the two others still queued, however slow the machine. While
// held, the engine still counts the running request as waiting (its stats are refreshed at
// the step's end): 3 waiting less 1 free run slot is 2, the queue limit.
TEST_F(ServerTest, QueueOverflowIsResourceExhaustedWithoutTouchingRunningStreams) {
  gate_.Set(false);
  StartServer({.max_seqs = 1, .max_queued_requests = 2, .step_observer = &gate_});
  std::atomic<bool> running_started{false};
  Streamed running;
  std::thread t([&] {
    v1::GenerateRequest r = Greedy("Once upon a time", 1900);
    r.set_ignore_eos(true);
    running = Generate(r, nullptr, [&](const v1::GenerateResponse& resp) {
      if (!resp.token_ids().empty()) running_started = true;
    });
  });
  while (!running_started) absl::SleepFor(absl::Milliseconds(1));
  std::vector<Streamed> queued(2);
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] { queued[i] = Generate(Greedy("The dog", 4)); });
  }
  while (engine_->Stats().num_submitted < 3) absl::SleepFor(absl::Milliseconds(1));
  const Streamed rejected = Generate(Greedy("Lily", 4));
  gate_.Set(true);
  EXPECT_EQ(rejected.status.error_code(), grpc::RESOURCE_EXHAUSTED)
      << rejected.status.error_message();
  EXPECT_EQ(rejected.status.error_message(),
            "queue full: 2 requests waiting beyond 1 free run slots (max_queued_requests = 2)");
  t.join();
  for (auto& w : waiters) w.join();
  ASSERT_TRUE(running.status.ok());
  EXPECT_EQ(running.token_ids.size(), 1900u);
  EXPECT_EQ(running.finish_reason, "length");
  for (const Streamed& q : queued) EXPECT_TRUE(q.status.ok()) << q.status.error_message();
  EXPECT_TRUE(WaitAllBlocksFree());
}

// Issue 14, finding 6: a client that never reads used to make the server buffer its whole
// completion. Now the request is aborted once 64 KiB are unsent: the client reads what was
// sent, then RESOURCE_EXHAUSTED naming the limit; the counter says why; blocks come back.
// The same request read as it comes is served whole.
TEST_F(ServerTest, ClientThatDoesNotReadIsAbortedAtTheUnsentCapAndCounted) {
  StartServer({}, absl::Seconds(30), /*max_unsent_bytes_per_stream=*/65536);
  // No BDP probing: the client's flow-control window stays at its default instead of
  // growing to take the whole completion into the client's own buffers.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Generation::NewStub(channel);
  v1::GenerateRequest r = Greedy("Once upon a time", 1900);
  r.set_ignore_eos(true);
  r.set_logprobs(20);  // ~200 bytes a token: ~380 KB in all
  const Streamed read = Generate(r);
  ASSERT_TRUE(read.status.ok()) << read.status.error_message();
  EXPECT_EQ(read.token_ids.size(), 1900u);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub->Generate(&context, r);
  const std::string counter = "pagoda:request_unsent_limit_total{tenant=\"anonymous\"}";
  const absl::Time give_up = absl::Now() + absl::Seconds(60);  // a bound on a hang only
  while (Metric(counter) < 1 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(Metric(counter), 1);
  v1::GenerateResponse response;
  int64_t tokens = 0;
  while (reader->Read(&response)) tokens += response.token_ids_size();
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_TRUE(absl::StartsWith(status.error_message(), "client is not reading: "))
      << status.error_message();
  EXPECT_TRUE(absl::EndsWith(status.error_message(), " exceed 65536 (max_unsent_bytes_per_stream)"))
      << status.error_message();
  EXPECT_LT(tokens, 1900);
  EXPECT_EQ(
      Metric("pagoda:request_failure_total{tenant=\"anonymous\",code=\"RESOURCE_EXHAUSTED\"}"), 1);
  EXPECT_TRUE(WaitAllBlocksFree());
  EXPECT_EQ(engine_->Stats().num_aborted, 1);
}

TEST_F(ServerTest, TokenizeDetokenizeModelInfoAndHealth) {
  StartServer();
  v1::TokenizeRequest tr;
  tr.set_text("Once upon a time");
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(client_->Tokenize(tr, &tokens).ok());
  EXPECT_EQ(std::vector<int32_t>(tokens.token_ids().begin(), tokens.token_ids().end()),
            (std::vector<int32_t>{1, 403, 407, 261, 378}));
  v1::DetokenizeRequest dr;
  dr.mutable_token_ids()->CopyFrom(tokens.token_ids());
  v1::DetokenizeResponse text;
  ASSERT_TRUE(client_->Detokenize(dr, &text).ok());
  EXPECT_EQ(text.text(), "Once upon a time");
  v1::ModelInfo info;
  ASSERT_TRUE(client_->GetModelInfo(&info).ok());
  EXPECT_EQ(info.vocab_size(), 512);
  EXPECT_EQ(info.num_kv_heads(), 4);
  EXPECT_EQ(info.context_length(), 2048);
  EXPECT_EQ(info.backend(), "cpu");
  EXPECT_EQ(info.kv_cache_dtype(), "f16");  // the CPU default
  EXPECT_EQ(std::vector<int32_t>(info.eog_token_ids().begin(), info.eog_token_ids().end()),
            engine_->tokenizer().eog_ids());
  // Regression (hardening): invalid UTF-8 answered UNIMPLEMENTED (the typed request failed
  // to parse inside gRPC); now the field is named. Ids outside the vocabulary likewise.
  v1::TokenizeRequest bad;
  bad.set_text("caf\xc3");  // the C++ client sends proto3 strings unchecked
  v1::TokenizeResponse unused;
  const grpc::Status bad_status = client_->Tokenize(bad, &unused);
  EXPECT_EQ(bad_status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(bad_status.error_message(), "text: is not valid UTF-8");
  v1::DetokenizeRequest outside;
  outside.add_token_ids(3);
  outside.add_token_ids(512);
  grpc::Status outside_status = client_->Detokenize(outside, &text);
  EXPECT_EQ(outside_status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(outside_status.error_message(), "token_ids: 512 at index 1 is outside the vocabulary");
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckResponse resp;
  ASSERT_TRUE(health->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &resp).ok());
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

// parse_special (default true): "</s>" in the prompt is the EOS token (id 2) or, when false,
// plain text; the prompt token count and Tokenize follow.
TEST_F(ServerTest, ParseSpecialChangesPromptTokens) {
  StartServer();
  const std::string text = "Once upon a time</s>";
  const std::vector<int32_t> plain_ids = engine_->tokenizer().Encode(text, true, false);
  ASSERT_GT(plain_ids.size(), 6u);

  v1::TokenizeRequest tr;
  tr.set_text(text);
  v1::TokenizeResponse parsed;
  ASSERT_TRUE(client_->Tokenize(tr, &parsed).ok());
  EXPECT_EQ(std::vector<int32_t>(parsed.token_ids().begin(), parsed.token_ids().end()),
            (std::vector<int32_t>{1, 403, 407, 261, 378, 2}));
  tr.set_parse_special(false);
  v1::TokenizeResponse plain;
  ASSERT_TRUE(client_->Tokenize(tr, &plain).ok());
  EXPECT_EQ(std::vector<int32_t>(plain.token_ids().begin(), plain.token_ids().end()), plain_ids);

  v1::GenerateRequest request = Greedy(text, 1);
  const Streamed by_default = Generate(request);
  ASSERT_TRUE(by_default.status.ok()) << by_default.status.error_message();
  EXPECT_EQ(by_default.usage.prompt_tokens(), 6);
  request.set_parse_special(true);
  EXPECT_EQ(Generate(request).usage.prompt_tokens(), 6);
  request.set_parse_special(false);
  const Streamed as_text = Generate(request);
  ASSERT_TRUE(as_text.status.ok()) << as_text.status.error_message();
  EXPECT_EQ(as_text.usage.prompt_tokens(), static_cast<int32_t>(plain_ids.size()));
}

// Whether a TCP connection to 127.0.0.1:port is refused (nobody listens).
bool ConnectionRefused(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool refused = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 &&
                       errno == ECONNREFUSED;
  close(fd);
  return refused;
}

// A channel with its own connection (gRPC shares connections between channels to the
// same address by default).
std::shared_ptr<grpc::Channel> FreshChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// The golden case 0 request, whose 64 greedy tokens are known.
v1::GenerateRequest GoldenRequest() {
  const nlohmann::json c = GoldenCases()[0];
  v1::GenerateRequest r;
  for (int id : c.at("prompt_token_ids")) r.add_prompt_token_ids(id);
  r.set_max_tokens(64);
  r.set_temperature(0);
  return r;
}

// Drain refuses new streams at the transport (listener closed, GOAWAY): a new channel's
// call is UNAVAILABLE without reaching the service, while the stream in flight (held by
// the engine gate) completes with its exact tokens.
TEST_F(ServerTest, DrainRefusesNewStreamsAtTheTransportWhileInFlightOnesFinish) {
  gate_.Set(false);
  StartServer({.step_observer = &gate_}, absl::Seconds(3600));
  Notification first_token;
  Streamed in_flight;
  std::thread stream([&] {
    in_flight = Generate(GoldenRequest(), nullptr, [&](const v1::GenerateResponse& r) {
      if (!r.token_ids().empty() && !first_token.HasBeenNotified()) first_token.Notify();
    });
  });
  first_token.WaitForNotification();  // the engine now waits at the gate
  EXPECT_EQ(server_->generate_calls(), 1);
  int64_t cut = -1;
  std::thread drain([&] { cut = server_->Drain(); });
  while (!ConnectionRefused(server_->port())) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(testing::HttpGet(server_->metrics_port(), "/health"), "NOT_SERVING\n");

  client::GenerationClient late(FreshChannel(absl::StrCat("127.0.0.1:", server_->port())), "");
  const grpc::Status refused = late.Generate(Greedy("Lily", 4), [](const auto&) {});
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_EQ(server_->generate_calls(), 1);  // the refused call never reached the service

  gate_.Set(true);
  stream.join();
  drain.join();
  ASSERT_TRUE(in_flight.status.ok()) << in_flight.status.error_message();
  EXPECT_EQ(in_flight.token_ids,
            GoldenCases()[0].at("output_token_ids").get<std::vector<int32_t>>());
  EXPECT_EQ(in_flight.finish_reason, "length");
  EXPECT_EQ(cut, 0);
  EXPECT_EQ(server_->generate_calls(), 1);
  EXPECT_EQ(testing::HttpGet(server_->metrics_port(), "/health"), "NOT_SERVING\n");
}

// A stream still open when the drain timeout passes is cancelled and counted.
TEST_F(ServerTest, DrainCutsAndCountsStreamsOpenAtTheDeadline) {
  gate_.Set(false);
  StartServer({.step_observer = &gate_}, absl::Milliseconds(100));
  Notification first_token;
  Streamed in_flight;
  std::thread stream([&] {
    in_flight = Generate(GoldenRequest(), nullptr, [&](const v1::GenerateResponse& r) {
      if (!r.token_ids().empty() && !first_token.HasBeenNotified()) first_token.Notify();
    });
  });
  first_token.WaitForNotification();
  EXPECT_EQ(server_->Drain(), 1);  // the gate is closed: the stream cannot finish in time
  gate_.Set(true);
  stream.join();
  EXPECT_FALSE(in_flight.status.ok());
  EXPECT_LT(in_flight.token_ids.size(), 64u);
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(const std::string& address) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckResponse resp;
  if (!stub->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &resp).ok()) {
    return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  }
  return resp.status();
}

TEST(DaemonTest, SigtermDrainsInFlightStreamsAndExitsZero) {
  testing::DaemonProcess daemon;
  // The drain must never time out here (sanitizer builds on a loaded machine are slow):
  // the assertion is that every stream finishes, not how fast.
  ASSERT_TRUE(daemon.Start(
      {"--model", testing::ModelPath("stories260K.gguf"), "--drain-timeout", "3600s"}));
  auto channel = *client::MakeChannel({.address = daemon.address()});
  EXPECT_EQ(Health(daemon.address()), grpc::health::v1::HealthCheckResponse::SERVING);
  {
    // Regression (hardening): GetModelInfo named the model by its absolute path.
    client::GenerationClient c(channel, "");
    v1::ModelInfo info;
    ASSERT_TRUE(c.GetModelInfo(&info).ok());
    EXPECT_EQ(info.model(), "stories260K");
  }
  std::atomic<int> started{0};
  std::vector<Streamed> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      client::GenerationClient c(channel, "");
      v1::GenerateRequest r = Greedy("Once upon a time", 1800);
      r.set_ignore_eos(true);
      bool counted = false;
      results[i].status = c.Generate(r, [&](const v1::GenerateResponse& resp) {
        results[i].token_ids.insert(results[i].token_ids.end(), resp.token_ids().begin(),
                                    resp.token_ids().end());
        if (!resp.finish_reason().empty()) results[i].finish_reason = resp.finish_reason();
        if (!counted && !resp.token_ids().empty()) {
          counted = true;
          ++started;
        }
      });
    });
  }
  while (started < 8) absl::SleepFor(absl::Milliseconds(1));
  daemon.Signal(SIGTERM);
  // Health turns NOT_SERVING, then the daemon stops listening (new calls fail at the
  // transport) while the streams drain.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (testing::HttpGet(daemon.metrics_port(), "/health") != "NOT_SERVING\n" &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(testing::HttpGet(daemon.metrics_port(), "/health"), "NOT_SERVING\n");
  // More signals during the drain change nothing, whichever thread the kernel hands them to
  // (regression: OpenBLAS's threads, started before main blocked the signals, took the
  // second SIGTERM with its default action and the process died, resetting every stream).
  daemon.Signal(SIGTERM);
  daemon.Signal(SIGINT);
  daemon.Signal(SIGTERM);
  while (!ConnectionRefused(daemon.port()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  client::GenerationClient late(FreshChannel(daemon.address()), "");
  const grpc::Status refused = late.Generate(Greedy("Lily", 4), [](const auto&) {});
  EXPECT_EQ(refused.error_code(), grpc::UNAVAILABLE) << refused.error_message();
  EXPECT_EQ(Health(daemon.address()), grpc::health::v1::HealthCheckResponse::UNKNOWN);
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(results[i].status.ok()) << results[i].status.error_message();
    EXPECT_EQ(results[i].token_ids.size(), 1800u) << i;
    EXPECT_EQ(results[i].finish_reason, "length") << i;
  }
  EXPECT_EQ(daemon.Wait(), 0) << daemon.Log();
}

}  // namespace
}  // namespace pagoda
