// Issue 22's acceptance, through the real daemon with its defaults (swap preemption on the
// CPU, prefill pacing): tenant x sends 1,100-token prompts that decode past 1,024 tokens of
// context while tenant y sends short prompts, greedy and seeded n = 2, on a pool far smaller
// than the load. Every request returns exactly the tokens it returns alone, with the f32 and
// with the f16 KV cache. The schedule depends on timing (pacing measures steps); what is
// asserted does not.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/generation_client.h"
#include "server/tenant_registry.h"
#include "tests/daemon_process.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

std::string Sha256Hex(const std::string& s) {
  std::string hex;
  for (uint8_t b : server::Sha256(s)) absl::StrAppend(&hex, absl::Hex(b, absl::kZeroPad2));
  return hex;
}

struct Request {
  std::string key;  // the tenant's API key
  v1::GenerateRequest proto;
};

// Token ids per sample index, or the stream's error.
struct Result {
  grpc::Status status;
  std::map<int32_t, std::vector<int32_t>> samples;
};

Result RunRequest(const std::string& address, const Request& r) {
  auto channel = client::MakeChannel({.address = address});
  Result out;
  if (!channel.ok()) {
    out.status = grpc::Status(grpc::StatusCode::INTERNAL, std::string(channel.status().message()));
    return out;
  }
  client::GenerationClient c(*channel, r.key);
  out.status = c.Generate(r.proto, [&](const v1::GenerateResponse& resp) {
    std::vector<int32_t>& ids = out.samples[resp.index()];
    ids.insert(ids.end(), resp.token_ids().begin(), resp.token_ids().end());
  });
  return out;
}

std::vector<Request> Workload() {
  std::vector<Request> requests;
  for (int i = 0; i < 2; ++i) {  // x: long prompts, decoding from 1,100 to 1,180 tokens
    Request r{.key = "key-x"};
    for (int t = 0; t < 1100; ++t) r.proto.add_prompt_token_ids(3 + (t * 31 + i * 7) % 500);
    r.proto.set_max_tokens(80);
    r.proto.set_temperature(0);
    r.proto.set_ignore_eos(true);
    requests.push_back(r);
  }
  for (int i = 0; i < 8; ++i) {  // y: short prompts, greedy or two seeded samples
    Request r{.key = "key-y"};
    r.proto.add_prompt_token_ids(1);
    for (int t = 0; t < 6 + i; ++t) r.proto.add_prompt_token_ids(3 + (t * 13 + i * 5) % 500);
    r.proto.set_max_tokens(60);
    r.proto.set_ignore_eos(true);
    if (i % 3 == 2) {
      r.proto.set_n(2);
      r.proto.set_temperature(0.8f);
      r.proto.set_seed(100 + i);
    } else {
      r.proto.set_temperature(0);
    }
    requests.push_back(r);
  }
  return requests;
}

TEST(DaemonExactnessTest, EveryRequestReturnsItsAloneTokensUnderLoad) {
  const std::string dir = testing::MakeTempDir();
  const std::string model = dir + "/tiny.gguf";
  const std::string bin = std::string(std::getenv("PAGODA_BIN_DIR")) + "/pagoda";
  ASSERT_EQ(testing::WaitForExit(
                testing::SpawnProcess({bin, "make-model", "--preset", "tiny", "--out", model},
                                      dir + "/make.out", dir + "/make.err")),
            0);
  const std::string tenants = dir + "/tenants.json";
  std::ofstream(tenants) << R"({"tenants": [{"name": "x", "api_key_sha256": [")"
                         << Sha256Hex("key-x") << R"("]}, {"name": "y", "api_key_sha256": [")"
                         << Sha256Hex("key-y") << R"("]}]})";
  const std::vector<Request> requests = Workload();
  for (const char* dtype : {"f32", "f16"}) {
    SCOPED_TRACE(dtype);
    // Alone: one request at a time, room for all of it.
    std::vector<Result> alone;
    {
      testing::DaemonProcess daemon;
      ASSERT_TRUE(daemon.Start({"--model", model, "--tenants", tenants, "--kv-cache-dtype", dtype,
                                "--num-blocks", "400"}));
      for (const Request& r : requests) {
        alone.push_back(RunRequest(daemon.address(), r));
        ASSERT_TRUE(alone.back().status.ok()) << alone.back().status.error_message();
      }
    }
    // Mixed: all at once on 100 blocks of 16 (the two long ones alone need 150).
    testing::DaemonProcess daemon;
    ASSERT_TRUE(daemon.Start({"--model", model, "--tenants", tenants, "--kv-cache-dtype", dtype,
                              "--num-blocks", "100"}));
    std::vector<Result> mixed(requests.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < requests.size(); ++i) {
      threads.emplace_back([&, i] { mixed[i] = RunRequest(daemon.address(), requests[i]); });
    }
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < requests.size(); ++i) {
      ASSERT_TRUE(mixed[i].status.ok()) << i << ": " << mixed[i].status.error_message();
      EXPECT_EQ(mixed[i].samples, alone[i].samples) << "request " << i;
      const size_t n = requests[i].proto.has_n() ? requests[i].proto.n() : 1;
      ASSERT_EQ(mixed[i].samples.size(), n);
      for (const auto& [index, ids] : mixed[i].samples) {
        EXPECT_EQ(ids.size(), static_cast<size_t>(requests[i].proto.max_tokens()));
      }
    }
    const std::string metrics = testing::HttpGet(daemon.metrics_port(), "/metrics");
    EXPECT_GT(testing::MetricValue(metrics, "pagoda:num_preemptions_total"), 0) << metrics;
  }
}

}  // namespace
}  // namespace pagoda
