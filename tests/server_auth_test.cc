// Tenants over the real gRPC server: API keys on every method (health stays open),
// rejected callers cause no engine work, the token rate limit with its RetryInfo while
// another tenant streams undisturbed, TLS and mutual TLS, and SIGHUP reloads through a
// real daemon process.
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/generation_client.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/support/error_details.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/daemon_process.h"
#include "tests/engine_test_util.h"
#include "tests/step_gate.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using grpc::health::v1::HealthCheckResponse;

std::string DigestHex(const std::string& key) {
  std::string out;
  for (uint8_t b : server::Sha256(key)) absl::StrAppend(&out, absl::Hex(b, absl::kZeroPad2));
  return out;
}

// A tenants file: one entry per {name, key, extra JSON fields}.
std::string TenantsJson(const std::vector<std::array<std::string, 3>>& tenants) {
  std::string json = R"({"tenants": [)";
  for (size_t i = 0; i < tenants.size(); ++i) {
    const auto& [name, key, extra] = tenants[i];
    absl::StrAppend(&json, i ? ", " : "", R"({"name": ")", name, R"(", "api_key_sha256": [")",
                    DigestHex(key), "\"]", extra.empty() ? "" : ", ", extra, "}");
  }
  return json + "]}";
}

v1::GenerateRequest Greedy(const std::string& prompt, int32_t max_tokens) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.set_max_tokens(max_tokens);
  r.set_temperature(0);
  return r;
}

struct Streamed {
  grpc::Status status;
  std::vector<int32_t> token_ids;
  std::string finish_reason;
  int messages = 0;
};

Streamed Generate(client::GenerationClient& client, const v1::GenerateRequest& request,
                  const std::function<void(const v1::GenerateResponse&)>& each = nullptr) {
  Streamed s;
  s.status = client.Generate(request, [&](const v1::GenerateResponse& r) {
    ++s.messages;
    s.token_ids.insert(s.token_ids.end(), r.token_ids().begin(), r.token_ids().end());
    if (!r.finish_reason().empty()) s.finish_reason = r.finish_reason();
    if (each) each(r);
  });
  return s;
}

std::vector<int32_t> GoldenOnceUponATime() {
  return nlohmann::json::parse(
             testing::ReadFileOrDie(testing::ModelPath("stories260K.golden.json")))
      .at("cases")[0]
      .at("output_token_ids")
      .get<std::vector<int32_t>>();
}

// The retry delay of the google.rpc.RetryInfo in a status' details; nullopt without one.
std::optional<absl::Duration> RetryDelay(const grpc::Status& status) {
  google::rpc::Status details;
  if (status.error_details().empty() || !grpc::ExtractErrorDetails(status, &details).ok()) {
    return std::nullopt;
  }
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::RetryInfo info;
    if (any.type_url() == "type.googleapis.com/google.rpc.RetryInfo" &&
        info.ParseFromString(any.value())) {
      return absl::Seconds(info.retry_delay().seconds()) +
             absl::Nanoseconds(info.retry_delay().nanos());
    }
  }
  return std::nullopt;
}

HealthCheckResponse::ServingStatus Health(std::shared_ptr<grpc::Channel> channel) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;  // no API key
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckResponse resp;
  if (!stub->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &resp).ok()) {
    return HealthCheckResponse::UNKNOWN;
  }
  return resp.status();
}

class ServerAuthTest : public ::testing::Test {
 protected:
  // Starts an in-process server with `options` (host, ports and model name filled in).
  void StartServer(server::ServerOptions options, engine::EngineConfig config = {}) {
    engine_ = testing::StoriesEngine(config);
    ASSERT_NE(engine_, nullptr);
    options.host = "127.0.0.1";
    options.port = 0;
    options.metrics_port = -1;
    options.model_name = "stories260K";
    auto server = server::Server::Start(options, engine_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void StartWithTenants(const std::string& json, engine::EngineConfig config = {}) {
    absl::StatusOr<server::TenantTable> table = server::ParseTenantsJson(json);
    ASSERT_TRUE(table.ok()) << table.status();
    StartServer({.tenants = *std::move(table)}, config);
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", server_->port()); }

  std::unique_ptr<client::GenerationClient> Client(const std::string& api_key) {
    return std::make_unique<client::GenerationClient>(*client::MakeChannel({.address = address()}),
                                                      api_key);
  }

  void TearDown() override {
    gate_.Set(true);  // a test that failed with the gate closed must not hang here
    server_.reset();
    if (engine_) engine_->Stop();
  }

  testing::StepGate gate_;  // outlives the engine, which may call it until stopped
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
};

TEST_F(ServerAuthTest, NoKeyOrWrongKeyIsUnauthenticatedOnEveryMethodBeforeAnyWork) {
  StartWithTenants(TenantsJson({{"a", "key-a", ""}, {"b", "key-b", ""}}));
  for (const std::string& key : {std::string(""), std::string("key-c"), std::string("KEY-A")}) {
    std::unique_ptr<client::GenerationClient> c = Client(key);
    // An invalid prompt: authentication comes before the request is even parsed.
    const Streamed g = Generate(*c, Greedy("caf\xc3", 8));
    EXPECT_EQ(g.status.error_code(), grpc::UNAUTHENTICATED)
        << key << ": " << g.status.error_message();
    EXPECT_EQ(g.messages, 0);
    EXPECT_EQ(Generate(*c, Greedy("Once upon a time", 8)).status.error_code(),
              grpc::UNAUTHENTICATED);
    v1::TokenizeRequest tr;
    tr.set_text("Once upon a time");
    v1::TokenizeResponse tokens;
    EXPECT_EQ(c->Tokenize(tr, &tokens).error_code(), grpc::UNAUTHENTICATED) << key;
    EXPECT_EQ(tokens.token_ids_size(), 0);
    v1::DetokenizeRequest dr;
    dr.add_token_ids(403);
    v1::DetokenizeResponse text;
    EXPECT_EQ(c->Detokenize(dr, &text).error_code(), grpc::UNAUTHENTICATED) << key;
    v1::ModelInfo info;
    EXPECT_EQ(c->GetModelInfo(&info).error_code(), grpc::UNAUTHENTICATED) << key;
    EXPECT_EQ(info.vocab_size(), 0);
  }
  v1::ModelInfo unused;
  EXPECT_EQ(Client("")->GetModelInfo(&unused).error_message(),
            "missing API key: send the metadata 'authorization: Bearer <key>'");
  // Rejected callers caused no engine work.
  EXPECT_EQ(engine_->Stats().num_submitted, 0);
  EXPECT_EQ(engine_->Stats().num_steps, 0);
  // Health stays open without a key.
  EXPECT_EQ(Health(*client::MakeChannel({.address = address()})), HealthCheckResponse::SERVING);
  // Both tenants' keys work on every method.
  for (const std::string& key : {std::string("key-a"), std::string("key-b")}) {
    std::unique_ptr<client::GenerationClient> c = Client(key);
    const Streamed ok = Generate(*c, Greedy("Once upon a time", 5));
    ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
    EXPECT_EQ(ok.token_ids, (std::vector<int32_t>{432, 383, 286, 261, 376}));
    v1::TokenizeRequest tr;
    tr.set_text("Once upon a time");
    v1::TokenizeResponse tokens;
    ASSERT_TRUE(c->Tokenize(tr, &tokens).ok());
    EXPECT_EQ(tokens.token_ids_size(), 5);
    v1::DetokenizeRequest dr;
    dr.mutable_token_ids()->CopyFrom(tokens.token_ids());
    v1::DetokenizeResponse text;
    ASSERT_TRUE(c->Detokenize(dr, &text).ok());
    EXPECT_EQ(text.text(), "Once upon a time");
    v1::ModelInfo info;
    ASSERT_TRUE(c->GetModelInfo(&info).ok());
    EXPECT_EQ(info.vocab_size(), 512);
  }
  EXPECT_GT(engine_->Stats().num_steps, 0);
}

TEST_F(ServerAuthTest, SingleApiKeyGuardsTheAnonymousTenant) {
  StartServer({.tenants = server::SingleKeyTable("sesame")});
  v1::ModelInfo info;
  EXPECT_EQ(Client("")->GetModelInfo(&info).error_code(), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Client("open")->GetModelInfo(&info).error_code(), grpc::UNAUTHENTICATED);
  const Streamed ok = Generate(*Client("sesame"), Greedy("Once upon a time", 5));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.token_ids, (std::vector<int32_t>{432, 383, 286, 261, 376}));
}

TEST_F(ServerAuthTest, OverRateIsResourceExhaustedWithRetryInfoAndOtherTenantsStream) {
  // "Once upon a time" is 5 prompt tokens (with BOS): a's first request takes 5 + 8 = 13
  // of its 20 tokens; the next needs 13 again, 6 more than the 7 left: 18 s at 20 a minute.
  StartWithTenants(TenantsJson({{"a", "key-a", R"("tokens_per_minute": 20)"}, {"b", "key-b", ""}}));
  std::unique_ptr<client::GenerationClient> a = Client("key-a");
  const Streamed first = Generate(*a, Greedy("Once upon a time", 8));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(first.token_ids.size(), 8u);
  // b streams 64 tokens; a is refused while b's stream runs.
  std::unique_ptr<client::GenerationClient> b = Client("key-b");
  std::atomic<bool> b_started{false};
  Streamed b_stream;
  std::thread t([&] {
    b_stream = Generate(*b, Greedy("Once upon a time", 64), [&](const v1::GenerateResponse& resp) {
      if (!resp.token_ids().empty()) b_started = true;
    });
    b_started = true;
  });
  while (!b_started) absl::SleepFor(absl::Milliseconds(1));
  const int64_t submitted = engine_->Stats().num_submitted;
  const Streamed refused = Generate(*a, Greedy("Once upon a time", 8));
  EXPECT_EQ(refused.status.error_code(), grpc::RESOURCE_EXHAUSTED)
      << refused.status.error_message();
  EXPECT_TRUE(absl::StartsWith(refused.status.error_message(),
                               "tenant \"a\": tokens_per_minute (20) exceeded; retry in "))
      << refused.status.error_message();
  EXPECT_EQ(refused.messages, 0);
  const std::optional<absl::Duration> delay = RetryDelay(refused.status);
  ASSERT_TRUE(delay.has_value());
  EXPECT_GT(*delay, absl::ZeroDuration());
  EXPECT_LE(*delay, absl::Seconds(18));
  EXPECT_EQ(engine_->Stats().num_submitted, submitted);  // refused before the engine
  t.join();
  ASSERT_TRUE(b_stream.status.ok()) << b_stream.status.error_message();
  EXPECT_EQ(b_stream.token_ids, GoldenOnceUponATime());
  EXPECT_EQ(b_stream.finish_reason, "length");
  // a's other methods are not rate limited.
  v1::ModelInfo info;
  EXPECT_TRUE(a->GetModelInfo(&info).ok());
}

// Issue 23 finding 6: 30 concurrent requests at 300 tokens a minute were all admitted while
// the bucket held a token, and served 6x the minute's budget. Each request now reserves its
// prompt plus max_tokens before it is queued; the clock is frozen, so nothing refills.
TEST_F(ServerAuthTest, ConcurrentRequestsCannotOverdrawTheBucket) {
  const absl::Time frozen = absl::Now();
  ASSERT_NO_FATAL_FAILURE(
      StartServer({.tenants = *server::ParseTenantsJson(TenantsJson(
                       {{"a", "key-a", R"("tokens_per_minute": 100)"}, {"b", "key-b", ""}})),
                   .rate_clock = [frozen] { return frozen; }}));
  // 5 prompt + 16 completion = 21 tokens each: 4 fit in 100, the 5th would overdraw.
  constexpr int kRequests = 10;
  std::vector<Streamed> results(kRequests);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = Generate(*Client("key-a"), Greedy("Once upon a time", 16)); });
  }
  for (std::thread& t : threads) t.join();
  int served = 0, refused = 0;
  int64_t tokens = 0;
  for (const Streamed& r : results) {
    if (r.status.ok()) {
      ++served;
      tokens += 5 + static_cast<int64_t>(r.token_ids.size());
      EXPECT_EQ(r.token_ids.size(), 16u);
    } else {
      ++refused;
      EXPECT_EQ(r.status.error_code(), grpc::RESOURCE_EXHAUSTED) << r.status.error_message();
      EXPECT_TRUE(absl::StrContains(r.status.error_message(), "the request may cost 21 tokens"))
          << r.status.error_message();
      EXPECT_TRUE(RetryDelay(r.status).has_value());
    }
  }
  EXPECT_EQ(served, 4);
  EXPECT_EQ(refused, kRequests - 4);
  EXPECT_EQ(tokens, 84);
  // 16 tokens are left: a request that may cost more than the bucket holds at all can never
  // run, and says so; one that fits exactly runs; a stop refunds what it did not use.
  const Streamed too_big = Generate(*Client("key-a"), Greedy("Once upon a time", 100));
  EXPECT_EQ(too_big.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StartsWith(too_big.status.error_message(),
                               "max_tokens: the request may cost 105 tokens (5 prompt + 100 "
                               "completion"))
      << too_big.status.error_message();
  EXPECT_TRUE(absl::StrContains(too_big.status.error_message(),
                                "more than tenant \"a\"'s token bucket holds (100 of "
                                "tokens_per_minute 100)"))
      << too_big.status.error_message();
  v1::GenerateRequest stopped = Greedy("Once upon a time", 11);  // 16: all that is left
  const std::vector<int32_t> golden = GoldenOnceUponATime();
  stopped.add_stop_token_ids(golden[2]);  // ends after 3 tokens: 8 of 16 are refunded
  const Streamed short_one = Generate(*Client("key-a"), stopped);
  ASSERT_TRUE(short_one.status.ok()) << short_one.status.error_message();
  EXPECT_EQ(short_one.token_ids.size(), 3u);
  v1::GenerateRequest refunded = Greedy("Once upon a time", 3);  // 8 = the refund
  EXPECT_TRUE(Generate(*Client("key-a"), refunded).status.ok());
  EXPECT_EQ(Generate(*Client("key-a"), Greedy("Once upon a time", 1)).status.error_code(),
            grpc::RESOURCE_EXHAUSTED);
  // The other tenant is unlimited.
  EXPECT_TRUE(Generate(*Client("key-b"), Greedy("Once upon a time", 16)).status.ok());
}

// The engine is held after the running request's first step until the refusal, so that
// request is still running and the other still queued, however slow the machine. While held,
// the engine counts the running request as waiting too: 2 waiting less 1 free run slot is 1.
TEST_F(ServerAuthTest, EngineQueueLimitGetsTheDefaultRetryInfo) {
  gate_.Set(false);
  StartServer({}, {.max_seqs = 1, .max_queued_requests = 1, .step_observer = &gate_});
  std::unique_ptr<client::GenerationClient> c = Client("");
  std::atomic<bool> running_started{false};
  Streamed running, queued;
  std::thread t([&] {
    v1::GenerateRequest r = Greedy("Once upon a time", 1900);
    r.set_ignore_eos(true);
    running = Generate(*c, r, [&](const v1::GenerateResponse& resp) {
      if (!resp.token_ids().empty()) running_started = true;
    });
  });
  while (!running_started) absl::SleepFor(absl::Milliseconds(1));
  std::thread w([&] { queued = Generate(*c, Greedy("The dog", 4)); });
  while (engine_->Stats().num_submitted < 2) absl::SleepFor(absl::Milliseconds(1));
  const Streamed rejected = Generate(*c, Greedy("Lily", 4));
  gate_.Set(true);
  EXPECT_EQ(rejected.status.error_code(), grpc::RESOURCE_EXHAUSTED)
      << rejected.status.error_message();
  EXPECT_EQ(RetryDelay(rejected.status), absl::Seconds(1));
  t.join();
  w.join();
  EXPECT_TRUE(running.status.ok());
  EXPECT_TRUE(queued.status.ok());
}

TEST_F(ServerAuthTest, ReloadThatTheEngineRejectsKeepsTheOldTenants) {
  StartWithTenants(TenantsJson({{"a", "key-a", ""}}));
  v1::ModelInfo info;
  // Floors above the whole KV pool: the engine refuses the table, so the keys stay too.
  absl::StatusOr<server::TenantTable> too_big = server::ParseTenantsJson(
      TenantsJson({{"b", "key-b", R"("kv_cache_floor_blocks": 1000000000)"}}));
  ASSERT_TRUE(too_big.ok()) << too_big.status();
  const absl::Status refused = server_->ReloadTenants(*std::move(too_big));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(Client("key-a")->GetModelInfo(&info).ok());
  EXPECT_EQ(Client("key-b")->GetModelInfo(&info).error_code(), grpc::UNAUTHENTICATED);
  ASSERT_TRUE(
      server_->ReloadTenants(*server::ParseTenantsJson(TenantsJson({{"b", "key-b", ""}}))).ok());
  EXPECT_EQ(Client("key-a")->GetModelInfo(&info).error_code(), grpc::UNAUTHENTICATED);
  EXPECT_TRUE(Client("key-b")->GetModelInfo(&info).ok());
}

// a's queue limit refuses a's third request, never b's, before any engine work. The engine
// is held after the running request's first step until the refusal (see
// EngineQueueLimitGetsTheDefaultRetryInfo): a has 2 waiting less 1 free run slot, its limit.
TEST_F(ServerAuthTest, OverTenantQueueIsResourceExhaustedWithRetryInfo) {
  gate_.Set(false);
  StartWithTenants(TenantsJson({{"a", "key-a", R"("max_queued_requests": 1)"}, {"b", "key-b", ""}}),
                   {.max_seqs = 1, .step_observer = &gate_});
  std::unique_ptr<client::GenerationClient> a = Client("key-a");
  std::unique_ptr<client::GenerationClient> b = Client("key-b");
  std::atomic<bool> running_started{false};
  Streamed running, queued, b_queued;
  std::thread t([&] {
    v1::GenerateRequest r = Greedy("Once upon a time", 1900);
    r.set_ignore_eos(true);
    running = Generate(*a, r, [&](const v1::GenerateResponse& resp) {
      if (!resp.token_ids().empty()) running_started = true;
    });
  });
  while (!running_started) absl::SleepFor(absl::Milliseconds(1));
  std::thread w([&] { queued = Generate(*a, Greedy("The dog", 4)); });
  while (engine_->Stats().num_submitted < 2) absl::SleepFor(absl::Milliseconds(1));
  const int64_t submitted = engine_->Stats().num_submitted;
  const Streamed rejected = Generate(*a, Greedy("Lily", 4));
  gate_.Set(true);
  EXPECT_EQ(rejected.status.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(rejected.status.error_message(), "max_queued_requests (1)"))
      << rejected.status.error_message();
  EXPECT_EQ(RetryDelay(rejected.status), absl::Seconds(1));
  EXPECT_EQ(engine_->Stats().num_submitted, submitted);
  std::thread wb([&] { b_queued = Generate(*b, Greedy("Once upon a time", 5)); });
  t.join();
  w.join();
  wb.join();
  EXPECT_TRUE(running.status.ok());
  EXPECT_TRUE(queued.status.ok());
  ASSERT_TRUE(b_queued.status.ok()) << b_queued.status.error_message();
  EXPECT_EQ(b_queued.token_ids, (std::vector<int32_t>{432, 383, 286, 261, 376}));
}

// A CA, a server certificate for 127.0.0.1 and a client certificate, made with the openssl
// CLI at run time.
struct TestPki {
  std::string dir;
  std::string Path(const std::string& name) const { return dir + "/" + name; }
};

const TestPki& Pki() {
  static const TestPki* pki = [] {
    auto* p = new TestPki{testing::MakeTempDir()};
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::ofstream(p->Path("server.ext"))
        << "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n";
    std::ofstream(p->Path("client.ext")) << "extendedKeyUsage=clientAuth\n";
    const std::string script = absl::StrCat(
        "set -e; cd ", p->dir, "; exec >openssl.log 2>&1; openssl req -x509 ", key,
        " -keyout ca.key -out ca.pem -days 2 -subj /CN=pagoda-test-ca",
        " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign;",
        " for n in server client; do openssl req ", key,
        " -keyout $n.key -out $n.csr -subj /CN=$n;",
        " openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2",
        " -extfile $n.ext -out $n.pem; done");
    const int rc = std::system(script.c_str());
    EXPECT_EQ(rc, 0) << testing::ReadFileOrDie(p->Path("openssl.log"));
    return p;
  }();
  return *pki;
}

TEST_F(ServerAuthTest, TlsServesWithKeysAndRefusesPlaintext) {
  const TestPki& pki = Pki();
  server::ServerOptions options{
      .tenants = *server::ParseTenantsJson(TenantsJson({{"a", "key-a", ""}})),
      .tls_cert = pki.Path("server.pem"),
      .tls_key = pki.Path("server.key")};
  StartServer(options);
  client::GenerationClient tls(
      *client::MakeChannel({.address = address(), .tls_ca = pki.Path("ca.pem")}), "key-a");
  const Streamed ok = Generate(tls, Greedy("Once upon a time", 5));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.token_ids, (std::vector<int32_t>{432, 383, 286, 261, 376}));
  client::GenerationClient tls_no_key(
      *client::MakeChannel({.address = address(), .tls_ca = pki.Path("ca.pem")}), "");
  v1::ModelInfo info;
  EXPECT_EQ(tls_no_key.GetModelInfo(&info).error_code(), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Client("key-a")->GetModelInfo(&info).error_code(), grpc::UNAVAILABLE);
}

TEST_F(ServerAuthTest, MutualTlsRefusesClientsWithoutACertificate) {
  const TestPki& pki = Pki();
  StartServer({.tls_cert = pki.Path("server.pem"),
               .tls_key = pki.Path("server.key"),
               .tls_client_ca = pki.Path("ca.pem")});
  client::GenerationClient with_cert(*client::MakeChannel({.address = address(),
                                                           .tls_ca = pki.Path("ca.pem"),
                                                           .tls_cert = pki.Path("client.pem"),
                                                           .tls_key = pki.Path("client.key")}),
                                     "");
  v1::ModelInfo info;
  const grpc::Status ok = with_cert.GetModelInfo(&info);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(info.vocab_size(), 512);
  client::GenerationClient no_cert(
      *client::MakeChannel({.address = address(), .tls_ca = pki.Path("ca.pem")}), "");
  EXPECT_EQ(no_cert.GetModelInfo(&info).error_code(), grpc::UNAVAILABLE);
  // A server certificate is not a client certificate (extendedKeyUsage serverAuth only).
  client::GenerationClient wrong_cert(*client::MakeChannel({.address = address(),
                                                            .tls_ca = pki.Path("ca.pem"),
                                                            .tls_cert = pki.Path("server.pem"),
                                                            .tls_key = pki.Path("server.key")}),
                                      "");
  EXPECT_NE(wrong_cert.GetModelInfo(&info).error_code(), grpc::OK);
}

TEST(ServerTlsOptionsTest, BadTlsOptionsAreInvalidArgument) {
  std::unique_ptr<engine::Engine> engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  const std::vector<std::pair<server::ServerOptions, std::string>> cases = {
      {{.tls_cert = "/nonexistent/cert.pem"}, "--tls-cert and --tls-key go together"},
      {{.tls_client_ca = "/nonexistent/ca.pem"}, "--tls-client-ca needs --tls-cert and --tls-key"},
      {{.tls_cert = "/nonexistent/cert.pem", .tls_key = "/nonexistent/key.pem"},
       "--tls-cert: cannot read /nonexistent/cert.pem"},
  };
  for (auto [options, message] : cases) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.metrics_port = -1;
    absl::StatusOr<std::unique_ptr<server::Server>> s =
        server::Server::Start(options, engine.get());
    ASSERT_FALSE(s.ok()) << message;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(), message);
  }
  engine->Stop();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

grpc::StatusCode InfoCode(const std::string& address, const std::string& key) {
  client::GenerationClient c(*client::MakeChannel({.address = address}), key);
  v1::ModelInfo info;
  return c.GetModelInfo(&info).error_code();
}

TEST(DaemonTenantsTest, SighupReloadsKeysKeepsStreamsAndABadFileKeepsTheOldKeys) {
  const std::string file = testing::MakeTempDir() + "/tenants.json";
  WriteFile(file, TenantsJson({{"a", "key-a", ""}}));
  testing::DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start({"--model", testing::ModelPath("stories260K.gguf"), "--tenants", file}));
  EXPECT_EQ(InfoCode(daemon.address(), "key-a"), grpc::OK);
  EXPECT_EQ(InfoCode(daemon.address(), "key-b"), grpc::UNAUTHENTICATED);
  EXPECT_EQ(InfoCode(daemon.address(), ""), grpc::UNAUTHENTICATED);
  // A long stream of a's runs across both reloads.
  auto channel = *client::MakeChannel({.address = daemon.address()});
  client::GenerationClient a(channel, "key-a");
  std::atomic<bool> started{false};
  Streamed stream;
  std::thread t([&] {
    v1::GenerateRequest r = Greedy("Once upon a time", 1800);
    r.set_ignore_eos(true);
    stream = Generate(a, r, [&](const v1::GenerateResponse& resp) {
      if (!resp.token_ids().empty()) started = true;
    });
  });
  while (!started) absl::SleepFor(absl::Milliseconds(1));

  WriteFile(file, TenantsJson({{"a", "key-a", ""}, {"b", "key-b", ""}}));
  daemon.Signal(SIGHUP);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (InfoCode(daemon.address(), "key-b") != grpc::OK && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(InfoCode(daemon.address(), "key-b"), grpc::OK) << daemon.Log();
  EXPECT_EQ(InfoCode(daemon.address(), "key-a"), grpc::OK);

  WriteFile(file, R"({"tenants": [{"name": "a", "api_key_sha256": ["not hex"]}]})");
  daemon.Signal(SIGHUP);
  while (!absl::StrContains(daemon.Log(), "tenants not reloaded") && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(absl::StrContains(daemon.Log(),
                                "SIGHUP: tenants not reloaded, the previous ones stay: " + file +
                                    ": tenant \"a\": api_key_sha256[0]: not a SHA-256 digest"))
      << daemon.Log();
  EXPECT_EQ(InfoCode(daemon.address(), "key-a"), grpc::OK);
  EXPECT_EQ(InfoCode(daemon.address(), "key-b"), grpc::OK);
  EXPECT_EQ(InfoCode(daemon.address(), "key-c"), grpc::UNAUTHENTICATED);

  t.join();
  ASSERT_TRUE(stream.status.ok()) << stream.status.error_message();
  EXPECT_EQ(stream.token_ids.size(), 1800u);
  EXPECT_EQ(stream.finish_reason, "length");
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0) << daemon.Log();
}

TEST(DaemonTenantsTest, ABadTenantsFileStopsTheDaemonAtStart) {
  const std::string file = testing::MakeTempDir() + "/tenants.json";
  WriteFile(file, R"({"tenants": [{"name": "a", "api_key_sha256": []}]})");
  const std::string log = testing::MakeTempDir() + "/serve.log";
  const pid_t pid = testing::SpawnProcess(
      {testing::BinDir() + "/pagoda", "serve", "--model", testing::ModelPath("stories260K.gguf"),
       "--port", "0", "--metrics-port", "-1", "--tenants", file},
      log, log);
  EXPECT_EQ(testing::WaitForExit(pid), 1);
  EXPECT_TRUE(absl::StrContains(testing::ReadFileOrDie(log),
                                "tenant \"a\": api_key_sha256: required (at least one digest)"))
      << testing::ReadFileOrDie(log);
}

}  // namespace
}  // namespace pagoda
