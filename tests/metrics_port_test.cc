// The probe port (--metrics-port) and the HTTP door (--http-port) over raw TCP on loopback:
// /health and /metrics are answered however many idle peers hold connections (issue 14,
// finding 8: 64 idle connections to cpp-httplib's thread pool blocked the probes for 20 s);
// the probe port answers only its two routes and closes peers that send no request.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/http/http_server.h"
#include "server/server.h"
#include "tests/engine_test_util.h"
#include "tests/raw_http.h"

namespace pagoda {
namespace {

using ::pagoda::testing::ConnectLoopback;
using ::pagoda::testing::RawHttp;
using ::pagoda::testing::RawReply;
using ::testing::HasSubstr;

constexpr int kIdlePeers = 256;

// `n` connections to `port` that send nothing; closed when destroyed.
class IdlePeers {
 public:
  IdlePeers(int port, int n) {
    for (int i = 0; i < n; ++i) fds_.push_back(ConnectLoopback(port));
  }
  ~IdlePeers() {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  int connected() const {
    int n = 0;
    for (int fd : fds_) n += fd >= 0;
    return n;
  }

 private:
  std::vector<int> fds_;
};

// Regression (finding 8): 256 idle connections, then each probe on a fresh connection gets
// its answer (each receive gives up after 5 s, so a probe stuck behind the idle peers
// fails rather than hangs). The same holds on the HTTP door.
TEST(MetricsPortTest, IdlePeersDoNotHoldUpHealthOrMetricsOnEitherPort) {
  std::unique_ptr<engine::Engine> engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  auto server = server::Server::Start({.host = "127.0.0.1",
                                       .port = 0,
                                       .metrics_port = 0,
                                       .model_name = "stories260K",
                                       .http_port = 0},
                                      engine.get());
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->metrics_port(), 0);
  {
    IdlePeers idle((*server)->metrics_port(), kIdlePeers);
    ASSERT_EQ(idle.connected(), kIdlePeers);
    const RawReply health = RawHttp((*server)->metrics_port(), "GET", "/health");
    EXPECT_EQ(health.status, 200);
    EXPECT_EQ(health.body, "SERVING\n");
    const RawReply metrics = RawHttp((*server)->metrics_port(), "GET", "/metrics");
    EXPECT_EQ(metrics.status, 200);
    EXPECT_THAT(metrics.head, HasSubstr("Content-Type: text/plain; version=0.0.4\r\n"));
    EXPECT_THAT(metrics.body, HasSubstr("\npagoda:num_requests_running 0\n"));
  }
  {
    IdlePeers idle((*server)->http_port(), kIdlePeers);
    ASSERT_EQ(idle.connected(), kIdlePeers);
    const RawReply health = RawHttp((*server)->http_port(), "GET", "/health");
    EXPECT_EQ(health.status, 200);
    EXPECT_EQ(health.body, R"({"status":"ok"})");
    const RawReply metrics = RawHttp((*server)->http_port(), "GET", "/metrics");
    EXPECT_EQ(metrics.status, 200);
    EXPECT_THAT(metrics.body, HasSubstr("\npagoda:num_requests_running 0\n"));
  }
  server->reset();
  engine->Stop();
}

// A probe-routes server; `serving` must outlive it.
absl::StatusOr<std::unique_ptr<server::http::HttpServer>> StartProbes(
    const std::atomic<bool>& serving, absl::Duration idle_timeout) {
  return server::http::HttpServer::Start(
      {.host = "127.0.0.1",
       .port = 0,
       .num_threads = 1,
       .session = {.routes = server::http::RouteSet::kProbes, .idle_timeout = idle_timeout}},
      {.render_metrics = [] { return std::string("pagoda:test_metric 7\n"); },
       .serving = [&serving] { return serving.load(); }});
}

// The probe route set needs no engine: health follows `serving`, /metrics is the renderer's
// text, every other route is 404 (405 for the probes' paths with another method), and a
// peer that sends no complete request is closed after the idle timeout. The routes are
// checked on a server with the default idle timeout, so a stalled test thread cannot have a
// request closed under it; the idle peers on one that closes them after 1 s.
TEST(MetricsPortTest, ProbeRoutesOnlyAndIdlePeersAreClosed) {
  std::atomic<bool> serving{true};
  auto server = StartProbes(serving, server::http::SessionOptions{}.idle_timeout);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  RawReply r = RawHttp(port, "GET", "/health");
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.head, HasSubstr("Content-Type: text/plain\r\n"));
  EXPECT_EQ(r.body, "SERVING\n");
  r = RawHttp(port, "GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.head, HasSubstr("Content-Type: text/plain; version=0.0.4\r\n"));
  EXPECT_EQ(r.body, "pagoda:test_metric 7\n");
  for (const char* path : {"/v1/models", "/", "/metrics/x"}) {
    r = RawHttp(port, "GET", path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_THAT(r.body, HasSubstr(R"("code":"unknown_url")")) << path;
  }
  r = RawHttp(port, "POST", "/v1/completions", R"({"prompt":"x"})");
  EXPECT_EQ(r.status, 404);
  r = RawHttp(port, "POST", "/health", "{}");
  EXPECT_EQ(r.status, 405);
  EXPECT_THAT(r.body, HasSubstr(R"("code":"method_not_allowed")"));
  serving = false;
  r = RawHttp(port, "GET", "/health");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "NOT_SERVING\n");

  // Idle, and half a request header: both closed by the server (each receive gives up after
  // 5 s, so a peer left open fails the test).
  auto closing = StartProbes(serving, absl::Seconds(1));
  ASSERT_TRUE(closing.ok()) << closing.status();
  const int idle = ConnectLoopback((*closing)->port());
  const int partial = ConnectLoopback((*closing)->port());
  ASSERT_GE(idle, 0);
  ASSERT_GE(partial, 0);
  ASSERT_TRUE(testing::SendAll(partial, "GET /health HTTP/1.1\r\nHost: x\r\n"));
  const testing::RawRead idle_read = testing::ReadUntilClosed(idle);
  const testing::RawRead partial_read = testing::ReadUntilClosed(partial);
  EXPECT_TRUE(idle_read.closed);
  EXPECT_EQ(idle_read.data, "");
  EXPECT_TRUE(partial_read.closed);
  EXPECT_EQ(partial_read.data, "");
  close(idle);
  close(partial);
}

}  // namespace
}  // namespace pagoda
