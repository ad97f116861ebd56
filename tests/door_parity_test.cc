// Both doors share one request lifecycle (server/generation_call.h): the same scripted engine
// outputs, refusals and failures sent through gRPC's GenerateStream and through the HTTP
// door (a live HttpServer on loopback whose engine is the same script, through the
// HttpDeps::client seam) leave identical per-tenant metrics and identical access-log lines
// (but for the door's "http " prefix and the wall-clock fields).
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/generate_stream.h"
#include "server/http/http_server.h"
#include "server/metrics.h"
#include "server/tenant_registry.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"

namespace pagoda::server {
namespace {

using nlohmann::json;

// Keeps every access-log line.
class AccessLines final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(lines_, {});
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string line(msg.payload.data(), msg.payload.size());
    if (absl::StrContains(line, "access tenant=")) lines_.push_back(std::move(line));
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

// One request's script: a refusal at Submit, or the outputs it delivers (inside Submit,
// before it returns: the doors must cope with outputs that beat the acceptance).
struct Script {
  absl::Status refusal;
  std::vector<engine::GenerationOutput> outputs;
};

class ScriptedEngine final : public engine::EngineClient {
 public:
  void Next(Script script) { script_ = std::move(script); }
  absl::StatusOr<engine::SubmitResult> Submit(engine::GenerationRequest request,
                                              std::shared_ptr<engine::OutputSink> sink) override {
    if (!script_.refusal.ok()) return script_.refusal;
    if (request.admit) {
      if (absl::Status admitted = request.admit({.prompt_tokens = 5, .max_completion_tokens = 4});
          !admitted.ok()) {
        return admitted;
      }
    }
    for (const engine::GenerationOutput& out : script_.outputs) sink->OnOutput(out);
    return engine::SubmitResult{.handle = ++handles_, .request_id = "req-1", .prompt_tokens = 5};
  }
  void Abort(engine::RequestHandle) override {}

 private:
  Script script_;
  engine::RequestHandle handles_ = 0;
};

engine::GenerationOutput Tokens(std::vector<int32_t> ids, std::string text) {
  engine::GenerationOutput out;
  out.token_ids = std::move(ids);
  out.text = std::move(text);
  return out;
}

engine::Usage ScriptedUsage(int32_t completion) {
  engine::Usage u;
  u.prompt_tokens = 5;
  u.completion_tokens = completion;
  u.cached_tokens = 2;
  u.queue_time = absl::Milliseconds(1);
  u.time_to_first_token = absl::Milliseconds(3);
  return u;
}

Script Finished() {
  engine::GenerationOutput last = Tokens({13}, " time");
  last.finish_reason = engine::FinishReason::kLength;
  last.usage = ScriptedUsage(4);
  return {.outputs = {Tokens({10}, "Once"), Tokens({11, 12}, " upon a"), last}};
}

Script FailsMidway() {
  engine::GenerationOutput last;
  last.finish_reason = engine::FinishReason::kError;
  last.error = absl::InternalError("scripted failure");
  last.usage = ScriptedUsage(1);
  return {.outputs = {Tokens({10}, "Once"), last}};
}

Script Refused() { return {.refusal = absl::InvalidArgumentError("max_tokens: scripted refusal")}; }

// The gRPC door's lifecycle with a transport whose writes complete at once.
class InstantTransport final : public StreamTransport {
 public:
  void StartWrite(const grpc::ByteBuffer*) override { in_flight = true; }
  void Finish(const grpc::Status& s) override { status = s; }
  bool in_flight = false;
  std::optional<grpc::Status> status;
};

// Metric samples without the wall-clock ones (e2e and inter-token latency: counts only).
std::vector<std::string> TimelessSamples(const std::string& exposition) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const bool timed = absl::StartsWith(line, "pagoda:e2e_request_latency_seconds") ||
                       absl::StartsWith(line, "pagoda:inter_token_latency_seconds");
    if (timed && !absl::StrContains(line, "_count")) continue;
    // CPU time: each door counts its own preparation, never equal.
    if (absl::StartsWith(line, "pagoda:tenant_preparation_cpu_microseconds_total")) continue;
    out.emplace_back(line);
  }
  return out;
}

// An access line without its door prefix and its wall-clock field.
std::string Timeless(std::string line) {
  if (absl::StartsWith(line, "http ")) line.erase(0, 5);
  const size_t at = line.find(" e2e_ms=");
  if (at == std::string::npos) return line;
  const size_t end = line.find(' ', at + 1);
  line.replace(at, end == std::string::npos ? std::string::npos : end - at, " e2e_ms=*");
  return line;
}

class DoorParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<AccessLines>();
    spdlog::default_logger()->sinks().push_back(sink_);
    absl::StatusOr<TenantTable> table = ParseTenantsJson(
        R"({"tenants": [{"name": "team-a", "tokens_per_minute": 100000, "api_key_sha256": [")"
        // sha256("sesame")
        "d0c04f4b1951e4aeaaec8223ed2039e542f3aae805a6fa7f6d794e5afff5d272"
        R"("]}]})");
    ASSERT_TRUE(table.ok()) << table.status();
    grpc_tenants_ = std::make_unique<TenantRegistry>(*table);
    http_tenants_ = std::make_unique<TenantRegistry>(*table);
    grpc_metrics_.ForTenant("team-a");
    http_metrics_.ForTenant("team-a");
    absl::StatusOr<std::unique_ptr<http::HttpServer>> server = http::HttpServer::Start(
        {.host = "127.0.0.1", .port = 0}, {.engine = nullptr,
                                           .client = &http_engine_,
                                           .tenants = http_tenants_.get(),
                                           .metrics = &http_metrics_,
                                           .model_name = "stories260K",
                                           .render_metrics = [] { return std::string(); },
                                           .serving = [] { return true; }});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override {
    server_.reset();
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }

  // One request through gRPC's GenerateStream; returns the final status code.
  grpc::StatusCode ThroughGrpc(const Script& script, const std::string& key) {
    grpc_engine_.Next(script);
    InstantTransport transport;
    std::shared_ptr<GenerateStream> stream = GenerateStream::Create(
        {.engine = &grpc_engine_,
         .metrics = &grpc_metrics_,
         .active_streams = &active_,
         .drain = &drain_},
        grpc_tenants_->Authenticate(absl::StrCat("Bearer ", key)), &transport);
    v1::GenerateRequest r;
    r.set_prompt("Once");
    r.set_max_tokens(4);
    const std::string bytes = r.SerializeAsString();
    grpc::Slice slice(bytes);
    stream->Start(grpc::ByteBuffer(&slice, 1));
    while (transport.in_flight) {
      transport.in_flight = false;
      stream->OnWriteDone(true);
    }
    EXPECT_TRUE(transport.status.has_value());
    stream->OnDone();
    return transport.status.has_value() ? transport.status->error_code() : grpc::StatusCode::OK;
  }

  // The same request through the HTTP door; returns the HTTP status.
  int ThroughHttp(const Script& script, const std::string& key, bool stream) {
    http_engine_.Next(script);
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(30, 0);
    const json body = {{"prompt", "Once"}, {"max_tokens", 4}, {"stream", stream}};
    httplib::Result r = c.Post("/v1/completions", {{"Authorization", "Bearer " + key}}, body.dump(),
                               "application/json");
    return r ? r->status : -1;
  }

  std::shared_ptr<AccessLines> sink_;
  ScriptedEngine grpc_engine_;
  ScriptedEngine http_engine_;
  std::unique_ptr<TenantRegistry> grpc_tenants_;
  std::unique_ptr<TenantRegistry> http_tenants_;
  ServerMetrics grpc_metrics_;
  ServerMetrics http_metrics_;
  std::atomic<int64_t> active_{0};
  DrainCounter drain_;
  std::unique_ptr<http::HttpServer> server_;
};

TEST_F(DoorParityTest, ScriptedRequestsLeaveTheSameMetricsAndAccessLines) {
  EXPECT_EQ(ThroughGrpc(Finished(), "sesame"), grpc::StatusCode::OK);
  EXPECT_EQ(ThroughGrpc(FailsMidway(), "sesame"), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(ThroughGrpc(Refused(), "sesame"), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ThroughGrpc(Finished(), "wrong"), grpc::StatusCode::UNAUTHENTICATED);
  const std::vector<std::string> grpc_lines = sink_->Take();

  EXPECT_EQ(ThroughHttp(Finished(), "sesame", /*stream=*/false), 200);
  EXPECT_EQ(ThroughHttp(FailsMidway(), "sesame", /*stream=*/false), 500);
  EXPECT_EQ(ThroughHttp(Refused(), "sesame", /*stream=*/false), 400);
  EXPECT_EQ(ThroughHttp(Finished(), "wrong", /*stream=*/false), 401);
  const std::vector<std::string> http_lines = sink_->Take();

  ASSERT_EQ(grpc_lines.size(), 4u);
  ASSERT_EQ(http_lines.size(), 4u);
  for (size_t i = 0; i < grpc_lines.size(); ++i) {
    EXPECT_FALSE(absl::StartsWith(grpc_lines[i], "http ")) << grpc_lines[i];
    EXPECT_TRUE(absl::StartsWith(http_lines[i], "http access ")) << http_lines[i];
    EXPECT_EQ(Timeless(grpc_lines[i]), Timeless(http_lines[i])) << "request " << i;
  }
  EXPECT_EQ(Timeless(grpc_lines[0]),
            "access tenant=\"team-a\" request_id=\"req-1\" status=OK finish_reason=length "
            "prompt_tokens=5 completion_tokens=4 cached_tokens=2 queue_ms=1.000 ttft_ms=3.000 "
            "e2e_ms=*");
  EXPECT_EQ(Timeless(grpc_lines[3]),
            "access tenant=\"anonymous\" request_id=\"\" status=UNAUTHENTICATED finish_reason=- "
            "prompt_tokens=0 completion_tokens=0 cached_tokens=0 queue_ms=- ttft_ms=- e2e_ms=* "
            "error=\"unknown API key\"");

  const engine::EngineStats stats;
  const std::vector<std::string> grpc_samples = TimelessSamples(grpc_metrics_.Render(stats));
  EXPECT_EQ(grpc_samples, TimelessSamples(http_metrics_.Render(stats)));
  auto has = [&](const std::string& sample) {
    return std::find(grpc_samples.begin(), grpc_samples.end(), sample) != grpc_samples.end();
  };
  EXPECT_TRUE(has("pagoda:generation_tokens_total{tenant=\"team-a\"} 5"));
  EXPECT_TRUE(has("pagoda:prompt_tokens_total{tenant=\"team-a\"} 10"));
  EXPECT_TRUE(has("pagoda:request_success_total{tenant=\"team-a\",finished_reason=\"length\"} 1"));
  EXPECT_TRUE(has("pagoda:request_failure_total{tenant=\"team-a\",code=\"INTERNAL\"} 1"));
  EXPECT_TRUE(has("pagoda:request_failure_total{tenant=\"team-a\",code=\"INVALID_ARGUMENT\"} 1"));
  EXPECT_TRUE(has("pagoda:request_failure_total{tenant=\"anonymous\",code=\"UNAUTHENTICATED\"} 1"));
  EXPECT_TRUE(has("pagoda:inter_token_latency_seconds_count{tenant=\"team-a\"} 3"));
}

// Streamed on HTTP, the same requests leave the same lines and metrics as whole ones.
TEST_F(DoorParityTest, StreamedHttpMatchesGrpc) {
  EXPECT_EQ(ThroughGrpc(Finished(), "sesame"), grpc::StatusCode::OK);
  EXPECT_EQ(ThroughGrpc(FailsMidway(), "sesame"), grpc::StatusCode::INTERNAL);
  const std::vector<std::string> grpc_lines = sink_->Take();
  EXPECT_EQ(ThroughHttp(Finished(), "sesame", /*stream=*/true), 200);
  EXPECT_EQ(ThroughHttp(FailsMidway(), "sesame", /*stream=*/true), 200);  // the error is an event
  const std::vector<std::string> http_lines = sink_->Take();
  ASSERT_EQ(grpc_lines.size(), 2u);
  ASSERT_EQ(http_lines.size(), 2u);
  for (size_t i = 0; i < grpc_lines.size(); ++i) {
    EXPECT_EQ(Timeless(grpc_lines[i]), Timeless(http_lines[i])) << "request " << i;
  }
  const engine::EngineStats stats;
  EXPECT_EQ(TimelessSamples(grpc_metrics_.Render(stats)),
            TimelessSamples(http_metrics_.Render(stats)));
}

// Every refusal on a generation route is counted and logged, whatever stage refused it: the
// method, the JSON body, the model, the key, and a draining server.
TEST_F(DoorParityTest, HttpRefusalsAreCountedAndLogged) {
  httplib::Client c("127.0.0.1", server_->port());
  const httplib::Headers key = {{"Authorization", "Bearer sesame"}};
  httplib::Result get = c.Get("/v1/completions", key);
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  httplib::Result bad_json = c.Post("/v1/completions", key, "{\"prompt\": ", "application/json");
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(bad_json->status, 400);
  httplib::Result no_messages = c.Post("/v1/chat/completions", key,
                                       R"({"model": "gpt-x", "messages": []})", "application/json");
  ASSERT_TRUE(no_messages);
  EXPECT_EQ(no_messages->status, 400);  // refused before its model is looked at
  httplib::Result other_model =
      c.Post("/v1/completions", key, R"({"model": "gpt-x", "prompt": "x"})", "application/json");
  ASSERT_TRUE(other_model);
  EXPECT_EQ(other_model->status, 404);
  server_->StartDraining();
  httplib::Client late("127.0.0.1", server_->port());
  httplib::Result draining =
      late.Post("/v1/completions", key, R"({"prompt": "x"})", "application/json");
  ASSERT_TRUE(draining);
  EXPECT_EQ(draining->status, 503);

  std::vector<std::string> lines = sink_->Take();
  for (std::string& line : lines) line = Timeless(line);
  ASSERT_EQ(lines.size(), 5u);
  const std::string head = "access tenant=\"team-a\" request_id=\"\" status=";
  const std::string zeros =
      " finish_reason=- prompt_tokens=0 completion_tokens=0 cached_tokens=0 queue_ms=- "
      "ttft_ms=- e2e_ms=* error=";
  // The method and draining are checked before the key: their tenant is still anonymous.
  EXPECT_EQ(lines[0], "access tenant=\"anonymous\" request_id=\"\" status=INVALID_ARGUMENT" +
                          zeros + "\"use POST\"");
  EXPECT_EQ(lines[1], head + "INVALID_ARGUMENT" + zeros + "\"body: not valid JSON\"");
  EXPECT_TRUE(absl::StartsWith(lines[2], head + "INVALID_ARGUMENT" + zeros)) << lines[2];
  EXPECT_EQ(lines[3], head + "NOT_FOUND" + zeros +
                          "\"model \\\"gpt-x\\\" does not exist; this server serves "
                          "\\\"stories260K\\\"\"");
  EXPECT_EQ(lines[4], "access tenant=\"anonymous\" request_id=\"\" status=UNAVAILABLE" + zeros +
                          "\"the server is draining\"");
  const std::vector<std::string> samples =
      TimelessSamples(http_metrics_.Render(engine::EngineStats()));
  auto has = [&](const std::string& sample) {
    return std::find(samples.begin(), samples.end(), sample) != samples.end();
  };
  EXPECT_TRUE(has("pagoda:request_failure_total{tenant=\"team-a\",code=\"INVALID_ARGUMENT\"} 2"));
  EXPECT_TRUE(has("pagoda:request_failure_total{tenant=\"team-a\",code=\"NOT_FOUND\"} 1"));
  EXPECT_TRUE(
      has("pagoda:request_failure_total{tenant=\"anonymous\",code=\"INVALID_ARGUMENT\"} 1"));
  EXPECT_TRUE(has("pagoda:request_failure_total{tenant=\"anonymous\",code=\"UNAVAILABLE\"} 1"));
}

}  // namespace
}  // namespace pagoda::server
