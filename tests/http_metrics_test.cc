// The HTTP door's per-tenant generation metrics match the gRPC door's (server_test.cc): one
// inter-token latency observation per token after the first, timed as the engine delivers
// (so it does not depend on how the connection merges deltas), streamed or not.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/daemon_process.h"
#include "tests/engine_test_util.h"
#include "tests/raw_http.h"

namespace pagoda {
namespace {

using nlohmann::json;

TEST(HttpMetricsTest, InterTokenLatencyIsObservedOncePerTokenAfterTheFirst) {
  std::unique_ptr<engine::Engine> engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  auto server = server::Server::Start({.host = "127.0.0.1",
                                       .port = 0,
                                       .metrics_port = 0,
                                       .model_name = "stories260K",
                                       .drain_timeout = absl::Seconds(5),
                                       .http_port = 0},
                                      engine.get());
  ASSERT_TRUE(server.ok()) << server.status();
  const auto metric = [&](const std::string& name) {
    return testing::MetricValue(testing::HttpGet((*server)->metrics_port(), "/metrics"),
                                absl::StrCat(name, "{tenant=\"anonymous\"}"));
  };
  const json body = {
      {"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}};
  json streamed = body;
  streamed["stream"] = true;
  int32_t expected_gaps = 0;
  for (const json& request : {body, streamed}) {
    const testing::RawReply reply = testing::RawHttp(
        (*server)->http_port(), "POST", "/v1/completions", request.dump(), absl::Seconds(20));
    ASSERT_EQ(reply.status, 200) << reply.body;
    expected_gaps += 5;  // 6 tokens, one per engine step
    EXPECT_EQ(metric("pagoda:inter_token_latency_seconds_count"), expected_gaps);
  }
  EXPECT_EQ(metric("pagoda:generation_tokens_total"), 12);
  EXPECT_EQ(metric("pagoda:time_to_first_token_seconds_count"), 2);
  server->reset();
  engine->Stop();
}

}  // namespace
}  // namespace pagoda
