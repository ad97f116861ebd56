// Shared KV through the real gRPC server: with a tenants file, a tenant's repeated prompt is
// served from the prefix cache (usage.cached_tokens), another tenant sending the exact same
// prompt gets none, and GetModelInfo says the cache is on; parallel samples (n) stream with
// their index, each with its own finish reason, and equal separate requests seeded seed + i.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/generation_client.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/engine_test_util.h"

namespace pagoda {
namespace {

std::string DigestHex(const std::string& key) {
  std::string out;
  for (uint8_t b : server::Sha256(key)) absl::StrAppend(&out, absl::Hex(b, absl::kZeroPad2));
  return out;
}

struct Result {
  grpc::Status status;
  std::vector<int32_t> token_ids;
  v1::Usage usage;
};

Result Generate(client::GenerationClient& client, const std::string& prompt,
                std::optional<bool> cache_prompt = std::nullopt,
                const std::string& cache_salt = "") {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.set_max_tokens(8);
  r.set_temperature(0);
  if (cache_prompt.has_value()) r.set_cache_prompt(*cache_prompt);
  r.set_cache_salt(cache_salt);
  Result out;
  out.status = client.Generate(r, [&](const v1::GenerateResponse& m) {
    out.token_ids.insert(out.token_ids.end(), m.token_ids().begin(), m.token_ids().end());
    if (!m.finish_reason().empty()) out.usage = m.usage();
  });
  return out;
}

TEST(ServerPrefixCacheTest, AnotherTenantSendingTheExactPromptGetsNoCachedTokens) {
  auto engine = testing::StoriesEngine({.block_size = 4});
  ASSERT_NE(engine, nullptr);
  const std::string json = absl::StrCat(
      R"({"tenants": [{"name": "team-a", "api_key_sha256": [")", DigestHex("key-a"),
      R"("]}, {"name": "team-b", "api_key_sha256": [")", DigestHex("key-b"), R"("]}]})");
  absl::StatusOr<server::TenantTable> table = server::ParseTenantsJson(json);
  ASSERT_TRUE(table.ok()) << table.status();
  auto server = server::Server::Start({.host = "127.0.0.1",
                                       .port = 0,
                                       .metrics_port = -1,
                                       .model_name = "stories260K",
                                       .tenants = *std::move(table)},
                                      engine.get());
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", (*server)->port());
  client::GenerationClient a(*client::MakeChannel({.address = address}), "key-a");
  client::GenerationClient b(*client::MakeChannel({.address = address}), "key-b");

  v1::ModelInfo info;
  ASSERT_TRUE(a.GetModelInfo(&info).ok());
  EXPECT_TRUE(info.prefix_caching());

  const std::string prompt = "Once upon a time, there was a little girl named Lily. She loved";
  const Result a1 = Generate(a, prompt);
  const Result b1 = Generate(b, prompt);
  const Result a2 = Generate(a, prompt);
  const Result b2 = Generate(b, prompt);
  for (const Result* r : {&a1, &b1, &a2, &b2})
    ASSERT_TRUE(r->status.ok()) << r->status.error_message();
  const int32_t n = a1.usage.prompt_tokens();
  ASSERT_GT(n, 8);
  EXPECT_EQ(a1.usage.cached_tokens(), 0);
  EXPECT_EQ(b1.usage.cached_tokens(), 0);  // team-a's blocks are not team-b's
  EXPECT_EQ(a2.usage.cached_tokens(), (n - 1) / 4 * 4);
  EXPECT_EQ(b2.usage.cached_tokens(), (n - 1) / 4 * 4);  // its own, from b1
  EXPECT_EQ(a1.token_ids, b1.token_ids);
  EXPECT_EQ(a1.token_ids, a2.token_ids);
  // Issue 50: cache_prompt false and cache_salt over gRPC, as over HTTP.
  const Result off = Generate(a, prompt, /*cache_prompt=*/false);
  const Result salted1 = Generate(a, prompt, std::nullopt, "user-1");
  const Result salted2 = Generate(a, prompt, std::nullopt, "user-1");
  for (const Result* r : {&off, &salted1, &salted2}) {
    ASSERT_TRUE(r->status.ok()) << r->status.error_message();
  }
  EXPECT_EQ(off.usage.cached_tokens(), 0);
  EXPECT_EQ(salted1.usage.cached_tokens(), 0);
  EXPECT_EQ(salted2.usage.cached_tokens(), (n - 1) / 4 * 4);
  EXPECT_EQ(off.token_ids, a1.token_ids);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
  server->reset();
  engine->Stop();
}

TEST(ServerParallelSamplingTest, SamplesStreamWithTheirIndexAndEqualSeparateSeededRequests) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  auto server = server::Server::Start(
      {.host = "127.0.0.1", .port = 0, .metrics_port = -1, .model_name = "stories260K"},
      engine.get());
  ASSERT_TRUE(server.ok()) << server.status();
  client::GenerationClient client(
      *client::MakeChannel({.address = absl::StrCat("127.0.0.1:", (*server)->port())}), "");
  auto request = [](uint64_t seed, int32_t n) {
    v1::GenerateRequest r;
    r.set_prompt("Once upon a time");
    r.set_max_tokens(24);
    r.set_temperature(0.9f);
    r.set_seed(seed);
    r.set_ignore_eos(true);
    if (n > 1) r.set_n(n);
    return r;
  };
  std::vector<std::vector<int32_t>> samples(3);
  std::vector<std::string> finish(3);
  int usages = 0;
  v1::Usage usage;
  const grpc::Status status = client.Generate(request(42, 3), [&](const v1::GenerateResponse& m) {
    ASSERT_LT(m.index(), 3);
    samples[m.index()].insert(samples[m.index()].end(), m.token_ids().begin(), m.token_ids().end());
    if (!m.finish_reason().empty()) finish[m.index()] = m.finish_reason();
    if (m.usage().completion_tokens() > 0) {
      ++usages;
      usage = m.usage();
    }
  });
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(usages, 1);
  EXPECT_EQ(usage.completion_tokens(), 3 * 24);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(finish[i], "length") << "sample " << i;
    std::vector<int32_t> alone;
    ASSERT_TRUE(client
                    .Generate(request(42 + i, 1),
                              [&](const v1::GenerateResponse& m) {
                                EXPECT_EQ(m.index(), 0);
                                alone.insert(alone.end(), m.token_ids().begin(),
                                             m.token_ids().end());
                              })
                    .ok());
    EXPECT_EQ(samples[i], alone) << "sample " << i;
  }
  EXPECT_NE(samples[0], samples[1]);
  v1::GenerateRequest bad = request(1, 17);
  const grpc::Status invalid = client.Generate(bad, [](const v1::GenerateResponse&) {});
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(invalid.error_message(), "n: must be in [1, 16]");
  EXPECT_TRUE(testing::WaitForIdle(*engine));
  server->reset();
  engine->Stop();
}

}  // namespace
}  // namespace pagoda
