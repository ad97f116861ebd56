// The HTTP door's routing, authentication, refusals and OpenAI framing, without sockets: an
// HttpRouter answers requests into a fake ResponseWriter that records responses and events,
// its generations submitted to a scripted engine through the HttpDeps::client seam (as
// tests/door_parity_test.cc does), its posted work run on the test's thread.
#include "server/http/http_router.h"

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "server/http/http_context.h"
#include "server/metrics.h"
#include "server/tenant_registry.h"

namespace pagoda::server::http {
namespace {

namespace bhttp = boost::beast::http;

// When every request of these tests arrived: a generation's "created".
const absl::Time kStart = absl::FromUnixSeconds(1700000000);

// Delivers `outputs` inside Submit (before it returns: the router must cope with outputs that
// beat the acceptance); keeps the sink for outputs the test delivers later.
class ScriptedEngine final : public engine::EngineClient {
 public:
  std::vector<engine::GenerationOutput> outputs;
  int submits = 0;
  std::vector<engine::RequestHandle> aborted;
  std::shared_ptr<engine::OutputSink> sink;

  absl::StatusOr<engine::SubmitResult> Submit(engine::GenerationRequest request,
                                              std::shared_ptr<engine::OutputSink> s) override {
    ++submits;
    if (request.admit) {
      if (absl::Status admitted = request.admit({.prompt_tokens = 5, .max_completion_tokens = 4});
          !admitted.ok()) {
        return admitted;
      }
    }
    for (const engine::GenerationOutput& out : outputs) s->OnOutput(out);
    sink = std::move(s);
    return engine::SubmitResult{.handle = 7, .request_id = "req-1", .prompt_tokens = 5};
  }
  void Abort(engine::RequestHandle handle) override { aborted.push_back(handle); }
};

engine::GenerationOutput Tokens(std::vector<int32_t> ids, std::string text) {
  engine::GenerationOutput out;
  out.token_ids = std::move(ids);
  out.text = std::move(text);
  return out;
}

engine::GenerationOutput Last(std::vector<int32_t> ids, std::string text,
                              engine::FinishReason reason, int32_t completion_tokens) {
  engine::GenerationOutput out = Tokens(std::move(ids), std::move(text));
  out.finish_reason = reason;
  out.usage.prompt_tokens = 5;
  out.usage.completion_tokens = completion_tokens;
  out.usage.cached_tokens = 2;
  return out;
}

// "Once upon a time", 4 tokens, cut at max_tokens.
std::vector<engine::GenerationOutput> Finished() {
  return {Tokens({10}, "Once"), Tokens({11, 12}, " upon a"),
          Last({13}, " time", engine::FinishReason::kLength, 4)};
}

// Records what the router writes; runs what it posts when the test pumps.
class FakeWriter final : public ResponseWriter {
 public:
  struct Response {
    int status = 0;
    std::string content_type;
    std::string body;
    std::optional<int64_t> retry_after;
    std::string headers;
  };
  std::vector<Response> responses;
  bool events_started = false;
  std::string event_headers;
  std::vector<std::string> events;
  bool events_ended = false;
  bool close_after = false;
  bool watching = false;
  bool is_closed = false;
  int64_t unsent = 0;  // what UnsentBytes reports

  void SetExtraHeaders(std::string lines) override { headers_ = std::move(lines); }
  void CloseAfterResponse() override { close_after = true; }
  void Respond(int status, const std::string& content_type, const std::string& body,
               std::optional<int64_t> retry_after) override {
    EXPECT_FALSE(is_closed);
    responses.push_back({status, content_type, body, retry_after, headers_});
  }
  void StartEvents() override {
    events_started = true;
    event_headers = headers_;
  }
  void WriteEvent(const std::string& event) override {
    EXPECT_TRUE(events_started);
    EXPECT_FALSE(events_ended);
    events.push_back(event);
  }
  void EndEvents() override { events_ended = true; }
  bool writing() const override { return false; }
  int64_t UnsentBytes() override { return unsent; }
  void WatchDisconnect() override { watching = true; }
  void Close() override { is_closed = true; }
  bool closed() const override { return is_closed; }
  Post Poster() override {
    return [tasks = tasks_](std::function<void()> task) {
      std::lock_guard<std::mutex> lock(tasks->mu);
      tasks->queue.push_back(std::move(task));
      tasks->cv.notify_one();
    };
  }

  bool answered() const { return !responses.empty() || events_ended || is_closed; }
  // Runs posted work until `done` (waiting for the preparation threads' posts), then what
  // is left in the queue.
  void PumpUntil(const std::function<bool()>& done) {
    while (!done()) {
      std::function<void()> task = NextTask(/*wait=*/true);
      ASSERT_TRUE(task) << "nothing posted";
      task();
    }
    while (std::function<void()> task = NextTask(/*wait=*/false)) task();
  }

 private:
  struct Tasks {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
  };
  std::function<void()> NextTask(bool wait) {
    std::unique_lock<std::mutex> lock(tasks_->mu);
    // A generous bound: only a broken router leaves nothing to run (never a timing check).
    if (wait)
      tasks_->cv.wait_for(lock, std::chrono::seconds(60), [&] { return !tasks_->queue.empty(); });
    if (tasks_->queue.empty()) return nullptr;
    std::function<void()> task = std::move(tasks_->queue.front());
    tasks_->queue.pop_front();
    return task;
  }

  std::string headers_;
  std::shared_ptr<Tasks> tasks_ = std::make_shared<Tasks>();
};

using Request = HttpRouter::Request;

Request MakeRequest(bhttp::verb verb, std::string target, std::string body = "",
                    std::optional<std::string> key = std::nullopt) {
  Request req(verb, target, 11);
  if (key.has_value()) req.set(bhttp::field::authorization, "Bearer " + *key);
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

std::string ErrorBody(const std::string& message, const std::string& type,
                      const std::string& code) {
  return absl::StrCat(R"({"error":{"code":")", code, R"(","message":")", message,
                      R"(","param":null,"type":")", type, R"("}})");
}

class HttpRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TenantTable> table = ParseTenantsJson(
        R"({"tenants": [{"name": "team-a", "tokens_per_minute": 100000, "api_key_sha256": [")"
        // sha256("sesame")
        "d0c04f4b1951e4aeaaec8223ed2039e542f3aae805a6fa7f6d794e5afff5d272"
        R"("]}]})");
    ASSERT_TRUE(table.ok()) << table.status();
    tenants_ = std::make_unique<TenantRegistry>(*table);
    metrics_.ForTenant("team-a");
    MakeContext(SessionOptions());
  }
  void TearDown() override { workers_.join(); }

  void MakeContext(SessionOptions options) {
    context_ = std::make_unique<HttpContext>(
        HttpDeps{.engine = nullptr,
                 .client = &engine_,
                 .tenants = tenants_.get(),
                 .metrics = &metrics_,
                 .model_name = "stories260K",
                 .render_metrics = [] { return std::string("# metrics\n"); },
                 .serving = [] { return true; }},
        std::move(options));
    context_->set_workers(&workers_);
  }

  // One request on a connection of its own, answered in full.
  FakeWriter Send(const Request& req) {
    FakeWriter writer;
    HttpRouter router(*context_, writer);
    router.Handle(req, kStart);
    writer.PumpUntil([&] { return writer.answered(); });
    router.OnResponseEnd();
    return writer;
  }

  bool HasSample(const std::string& sample) const {
    for (absl::string_view line : absl::StrSplit(metrics_.Render(engine::EngineStats()), '\n')) {
      if (line == sample) return true;
    }
    return false;
  }

  ScriptedEngine engine_;
  std::unique_ptr<TenantRegistry> tenants_;
  ServerMetrics metrics_;
  std::unique_ptr<HttpContext> context_;
  boost::asio::thread_pool workers_{1};
};

TEST_F(HttpRouterTest, UnknownRouteIs404) {
  FakeWriter w = Send(MakeRequest(bhttp::verb::get, "/v1/nope?x=1"));
  ASSERT_EQ(w.responses.size(), 1u);
  EXPECT_EQ(w.responses[0].status, 404);
  EXPECT_EQ(w.responses[0].content_type, "application/json");
  EXPECT_EQ(w.responses[0].body,
            ErrorBody("no route for /v1/nope", "invalid_request_error", "unknown_url"));
  EXPECT_FALSE(w.events_started);
}

TEST_F(HttpRouterTest, HealthAndMetrics) {
  FakeWriter health = Send(MakeRequest(bhttp::verb::get, "/health"));
  ASSERT_EQ(health.responses.size(), 1u);
  EXPECT_EQ(health.responses[0].status, 200);
  EXPECT_EQ(health.responses[0].body, R"({"status":"ok"})");
  // With keys configured, /metrics on the door needs one.
  FakeWriter anonymous = Send(MakeRequest(bhttp::verb::get, "/metrics"));
  ASSERT_EQ(anonymous.responses.size(), 1u);
  EXPECT_EQ(anonymous.responses[0].status, 401);
  FakeWriter keyed = Send(MakeRequest(bhttp::verb::get, "/metrics", "", "sesame"));
  ASSERT_EQ(keyed.responses.size(), 1u);
  EXPECT_EQ(keyed.responses[0].status, 200);
  EXPECT_EQ(keyed.responses[0].content_type, "text/plain; version=0.0.4");
  EXPECT_EQ(keyed.responses[0].body, "# metrics\n");
  FakeWriter post = Send(MakeRequest(bhttp::verb::post, "/health"));
  ASSERT_EQ(post.responses.size(), 1u);
  EXPECT_EQ(post.responses[0].status, 405);
}

TEST_F(HttpRouterTest, MissingKeyIs401AndCounted) {
  FakeWriter w = Send(MakeRequest(bhttp::verb::post, "/v1/completions", R"({"prompt": "x"})"));
  ASSERT_EQ(w.responses.size(), 1u);
  EXPECT_EQ(w.responses[0].status, 401);
  EXPECT_EQ(w.responses[0].body,
            ErrorBody("missing API key: send the header 'Authorization: Bearer <key>'",
                      "authentication_error", "invalid_api_key"));
  EXPECT_EQ(engine_.submits, 0);
  EXPECT_TRUE(
      HasSample("pagoda:request_failure_total{tenant=\"anonymous\",code=\"UNAUTHENTICATED\"} 1"));
}

TEST_F(HttpRouterTest, BadJsonIs400CountedForTheTenant) {
  FakeWriter w =
      Send(MakeRequest(bhttp::verb::post, "/v1/completions", R"({"prompt": )", "sesame"));
  ASSERT_EQ(w.responses.size(), 1u);
  EXPECT_EQ(w.responses[0].status, 400);
  EXPECT_EQ(w.responses[0].body,
            ErrorBody("body: not valid JSON", "invalid_request_error", "invalid_request"));
  EXPECT_EQ(engine_.submits, 0);
  EXPECT_TRUE(
      HasSample("pagoda:request_failure_total{tenant=\"team-a\",code=\"INVALID_ARGUMENT\"} 1"));
}

TEST_F(HttpRouterTest, DrainingRefusesAndClosesTheConnection) {
  context_->set_draining();
  FakeWriter w = Send(MakeRequest(bhttp::verb::post, "/v1/completions", "{}", "sesame"));
  ASSERT_EQ(w.responses.size(), 1u);
  EXPECT_EQ(w.responses[0].status, 503);
  EXPECT_TRUE(w.close_after);
  EXPECT_TRUE(
      HasSample("pagoda:request_failure_total{tenant=\"anonymous\",code=\"UNAVAILABLE\"} 1"));
}

TEST_F(HttpRouterTest, CompletionBody) {
  engine_.outputs = Finished();
  FakeWriter w = Send(MakeRequest(bhttp::verb::post, "/v1/completions",
                                  R"({"prompt": "Once", "max_tokens": 4})", "sesame"));
  ASSERT_EQ(w.responses.size(), 1u);
  EXPECT_EQ(w.responses[0].status, 200);
  EXPECT_EQ(w.responses[0].content_type, "application/json");
  EXPECT_EQ(w.responses[0].body,
            R"({"choices":[{"finish_reason":"length","index":0,"logprobs":null,)"
            R"("text":"Once upon a time"}],"created":1700000000,"id":"cmpl-req-1",)"
            R"("model":"stories260K","object":"text_completion","system_fingerprint":null,)"
            R"("usage":{"completion_tokens":4,"prompt_tokens":5,)"
            R"("prompt_tokens_details":{"cached_tokens":2},"total_tokens":9}})");
  EXPECT_TRUE(w.watching);
  EXPECT_FALSE(w.close_after);
  EXPECT_TRUE(
      HasSample("pagoda:request_success_total{tenant=\"team-a\",finished_reason=\"length\"} 1"));
  EXPECT_EQ(context_->in_flight(), 0);
}

TEST_F(HttpRouterTest, StreamedCompletionEvents) {
  engine_.outputs = Finished();
  FakeWriter w =
      Send(MakeRequest(bhttp::verb::post, "/v1/completions",
                       R"({"prompt": "Once", "max_tokens": 4, "stream": true})", "sesame"));
  EXPECT_TRUE(w.responses.empty());
  ASSERT_TRUE(w.events_started);
  EXPECT_TRUE(w.events_ended);
  const std::string head = R"(data: {"choices":[{"finish_reason":)";
  const std::string tail = R"(,"created":1700000000,"id":"cmpl-req-1","model":"stories260K",)"
                           R"("object":"text_completion","system_fingerprint":null})"
                           "\n\n";
  const std::vector<std::string> expected = {
      head + R"(null,"index":0,"logprobs":null,"text":"Once upon a time"}])" + tail,
      head + R"("length","index":0,"logprobs":null,"text":""}])" + tail,
      "data: [DONE]\n\n",
  };
  EXPECT_EQ(w.events, expected);
  EXPECT_EQ(context_->in_flight(), 0);
}

TEST_F(HttpRouterTest, StreamedChatWithUsage) {
  engine_.outputs = Finished();
  FakeWriter w = Send(MakeRequest(
      bhttp::verb::post, "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": true,)"
      R"( "stream_options": {"include_usage": true}})",
      "sesame"));
  ASSERT_TRUE(w.events_ended);
  const std::string head = R"(data: {"choices":[{)";
  const std::string tail =
      R"(,"created":1700000000,"id":"chatcmpl-req-1","model":"stories260K",)"
      R"("object":"chat.completion.chunk","system_fingerprint":null,"usage":null})"
      "\n\n";
  const std::vector<std::string> expected = {
      head +
          R"("delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,)"
          R"("logprobs":null}])" +
          tail,
      head +
          R"("delta":{"content":"Once upon a time"},"finish_reason":null,"index":0,)"
          R"("logprobs":null}])" +
          tail,
      head + R"("delta":{},"finish_reason":"length","index":0,"logprobs":null}])" + tail,
      R"(data: {"choices":[],"created":1700000000,"id":"chatcmpl-req-1",)"
      R"("model":"stories260K","object":"chat.completion.chunk","system_fingerprint":null,)"
      R"("usage":{"completion_tokens":4,"prompt_tokens":5,)"
      R"("prompt_tokens_details":{"cached_tokens":2},"total_tokens":9}})"
      "\n\n",
      "data: [DONE]\n\n",
  };
  EXPECT_EQ(w.events, expected);
}

// A failure after the stream started is an error event, and the connection closes after it.
TEST_F(HttpRouterTest, StreamedFailureIsAnErrorEvent) {
  engine_.outputs = {Tokens({10}, "Once"), Last({}, "", engine::FinishReason::kError, 1)};
  engine_.outputs.back().error = absl::InternalError("scripted failure");
  FakeWriter w = Send(MakeRequest(bhttp::verb::post, "/v1/completions",
                                  R"({"prompt": "Once", "stream": true})", "sesame"));
  ASSERT_TRUE(w.events_ended);
  ASSERT_EQ(w.events.size(), 1u);
  EXPECT_EQ(w.events[0],
            "data: " + ErrorBody("scripted failure", "server_error", "internal_error") + "\n\n");
  EXPECT_TRUE(w.close_after);
  EXPECT_TRUE(HasSample("pagoda:request_failure_total{tenant=\"team-a\",code=\"INTERNAL\"} 1"));
}

// The client leaving aborts the engine request; its last output ends the call, writing
// nothing.
TEST_F(HttpRouterTest, ClientGoneAbortsTheEngineRequest) {
  engine_.outputs = {Tokens({10}, "Once")};
  FakeWriter w;
  HttpRouter router(*context_, w);
  router.Handle(MakeRequest(bhttp::verb::post, "/v1/completions",
                            R"({"prompt": "Once", "stream": true})", "sesame"),
                kStart);
  w.PumpUntil([&] { return !w.events.empty(); });
  EXPECT_EQ(router.GenerationIdForLog(), "\"req-1\"");
  router.OnClientGone();
  w.Close();
  EXPECT_EQ(engine_.aborted, std::vector<engine::RequestHandle>{7});
  engine_.sink->OnOutput(Last({}, "", engine::FinishReason::kAbort, 1));
  w.PumpUntil([&] { return context_->in_flight() == 0; });
  EXPECT_EQ(w.events.size(), 1u);
  EXPECT_FALSE(w.events_ended);
  EXPECT_TRUE(HasSample("pagoda:request_cancelled_total{tenant=\"team-a\"} 1"));
}

// Output held past SessionOptions::max_unsent_bytes cuts a whole (non-streamed) response:
// 429, the engine request aborted, the connection closed after the answer.
TEST_F(HttpRouterTest, UnsentCapCutsAWholeResponse) {
  SessionOptions options;
  options.max_unsent_bytes = 8;
  MakeContext(options);
  engine_.outputs = {Tokens({10, 11}, "Once upon")};  // 9 bytes held
  FakeWriter w;
  HttpRouter router(*context_, w);
  router.Handle(
      MakeRequest(bhttp::verb::post, "/v1/completions", R"({"prompt": "Once"})", "sesame"), kStart);
  w.PumpUntil([&] { return w.answered(); });
  ASSERT_EQ(w.responses.size(), 1u);
  EXPECT_EQ(w.responses[0].status, 429);
  EXPECT_EQ(w.responses[0].body,
            ErrorBody("response not sent yet: 9 bytes of output unsent exceed 8 "
                      "(max_unsent_bytes_per_stream); stream long outputs (\\\"stream\\\": true)",
                      "rate_limit_error", "rate_limit_exceeded"));
  EXPECT_TRUE(w.responses[0].retry_after.has_value());
  EXPECT_TRUE(w.close_after);
  EXPECT_EQ(engine_.aborted, std::vector<engine::RequestHandle>{7});
  // The engine's last output after the abort ends the call; nothing more is written.
  engine_.sink->OnOutput(Last({}, "", engine::FinishReason::kAbort, 2));
  w.PumpUntil([&] { return context_->in_flight() == 0; });
  EXPECT_EQ(w.responses.size(), 1u);
  EXPECT_FALSE(w.events_started);
}

TEST_F(HttpRouterTest, CorsPreflightAndHeaders) {
  SessionOptions options;
  options.cors_allow_origins = {"https://app.example"};
  MakeContext(options);
  Request preflight = MakeRequest(bhttp::verb::options, "/v1/completions");
  preflight.set(bhttp::field::origin, "https://app.example");
  FakeWriter w = Send(preflight);
  ASSERT_EQ(w.responses.size(), 1u);
  EXPECT_EQ(w.responses[0].status, 204);
  EXPECT_NE(w.responses[0].headers.find("Access-Control-Allow-Origin: https://app.example\r\n"),
            std::string::npos);
  Request other = MakeRequest(bhttp::verb::options, "/v1/completions");
  other.set(bhttp::field::origin, "https://evil.example");
  FakeWriter refused = Send(other);
  ASSERT_EQ(refused.responses.size(), 1u);
  EXPECT_EQ(refused.responses[0].status, 403);
  Request get = MakeRequest(bhttp::verb::get, "/health");
  get.set(bhttp::field::origin, "https://app.example");
  FakeWriter health = Send(get);
  ASSERT_EQ(health.responses.size(), 1u);
  EXPECT_EQ(health.responses[0].headers,
            "Access-Control-Allow-Origin: https://app.example\r\nVary: Origin\r\n");
}

}  // namespace
}  // namespace pagoda::server::http

namespace pagoda::server::http {
namespace {

// Issue 44, finding 10: the preparation queue is shared by all tenants, and one of them
// may hold at most half of it; a job that throws is dropped and the thread goes on.
TEST(HttpContextTest, PreparationQueueIsSharedFairlyAndSurvivesAThrow) {
  ServerMetrics metrics;
  HttpContext context(HttpDeps{.metrics = &metrics}, SessionOptions());
  boost::asio::thread_pool workers(1);
  context.set_workers(&workers);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> ran{0};
  ASSERT_TRUE(context
                  .Offload("a",
                           [&] {
                             std::unique_lock<std::mutex> lock(mu);
                             cv.wait(lock, [&] { return release; });
                             throw std::runtime_error("boom");
                           })
                  .ok());
  for (int i = 1; i < HttpContext::kMaxPendingJobsPerTenant; ++i) {
    ASSERT_TRUE(context.Offload("a", [&] { ++ran; }).ok()) << i;
  }
  const absl::Status refused = context.Offload("a", [&] { ++ran; });
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(), "tenant \"a\" has 32 requests being prepared; at most 32");
  // The others still have their half.
  for (int i = 0; i < HttpContext::kMaxPendingJobs - HttpContext::kMaxPendingJobsPerTenant; ++i) {
    ASSERT_TRUE(context.Offload(i % 2 ? "b" : "", [&] { ++ran; }).ok()) << i;
  }
  const absl::Status full = context.Offload("c", [&] { ++ran; });
  EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  workers.join();  // the throwing job did not end the thread: every other one ran
  EXPECT_EQ(ran.load(), HttpContext::kMaxPendingJobs - 1);
}

}  // namespace
}  // namespace pagoda::server::http
