// The tenants file (parsing and every validation error), API-key lookup by digest, reloads,
// the token bucket on an injected clock, and RetryInfo details on RESOURCE_EXHAUSTED.
#include "server/tenant_registry.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/support/error_details.h"
#include "gtest/gtest.h"
#include "server/status_details.h"
#include "server/token_bucket.h"
#include "server/token_reservation.h"

namespace pagoda::server {
namespace {

std::string Hex(const KeyDigest& d) {
  std::string out;
  for (uint8_t b : d) absl::StrAppend(&out, absl::Hex(b, absl::kZeroPad2));
  return out;
}

std::string DigestOf(const std::string& key) { return Hex(Sha256(key)); }

TEST(Sha256Test, KnownDigest) {
  // sha256("abc"), FIPS 180-2 appendix B.1.
  EXPECT_EQ(DigestOf("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TenantsFileTest, ParsesEveryFieldAndDefaults) {
  const std::string json = absl::StrCat(
      R"({"tenants": [{"name": "a", "api_key_sha256": [")", DigestOf("ka"), R"("], "weight": 2.5,
      "priority": "critical", "max_running_requests": 64, "max_queued_requests": 256,
      "kv_cache_cap_blocks": 100, "kv_cache_floor_blocks": 10, "tokens_per_minute": 6000},
      {"name": "b", "api_key_sha256": [")",
      absl::AsciiStrToUpper(DigestOf("kb1")), R"(", ")", DigestOf("kb2"), R"("]}]})");
  absl::StatusOr<TenantTable> table = ParseTenantsJson(json);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->tenants.size(), 2u);
  const Tenant& a = table->tenants[0];
  EXPECT_EQ(a.engine.name, "a");
  EXPECT_EQ(a.engine.weight, 2.5);
  EXPECT_EQ(a.engine.priority, engine::PriorityClass::kCritical);
  EXPECT_EQ(a.engine.max_running_requests, 64);
  EXPECT_EQ(a.engine.max_queued_requests, 256);
  EXPECT_EQ(a.engine.kv_cache_cap_blocks, 100);
  EXPECT_EQ(a.engine.kv_cache_floor_blocks, 10);
  EXPECT_EQ(a.tokens_per_minute, 6000);
  EXPECT_EQ(a.key_digests, std::vector<KeyDigest>{Sha256("ka")});
  const Tenant& b = table->tenants[1];
  EXPECT_EQ(b.engine.name, "b");
  EXPECT_EQ(b.engine.weight, 1.0);
  EXPECT_EQ(b.engine.priority, engine::PriorityClass::kStandard);
  EXPECT_EQ(b.engine.max_running_requests, 0);
  EXPECT_EQ(b.engine.max_queued_requests, 0);
  EXPECT_EQ(b.engine.kv_cache_cap_blocks, 0);
  EXPECT_EQ(b.engine.kv_cache_floor_blocks, 0);
  EXPECT_EQ(b.tokens_per_minute, 0);
  EXPECT_EQ(b.key_digests, (std::vector<KeyDigest>{Sha256("kb1"), Sha256("kb2")}));
}

TEST(TenantsFileTest, EveryValidationErrorNamesTenantAndField) {
  const std::string ka = DigestOf("ka"), kb = DigestOf("kb");
  // $A and $B stand for the digests of two distinct keys.
  struct Case {
    std::string json;
    std::string message;  // the exact message after "tenants file: " or the whole message
  };
  const std::vector<Case> cases = {
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "color": "red"}]})",
       "tenants file: not valid: "},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "weight": "heavy"}]})",
       "tenants file: not valid: "},
      {R"({"tenants": [)", "tenants file: not valid: "},
      {R"({"tenants": []})", "tenants file: tenants: at least one tenant is required"},
      {R"({})", "tenants file: tenants: at least one tenant is required"},
      {R"({"tenants": [{"api_key_sha256": ["$A"]}]})", "tenants[0]: name: required (non-empty)"},
      {R"({"tenants": [{"name": "anonymous", "api_key_sha256": ["$A"]}]})",
       "tenant \"anonymous\": name: \"anonymous\" is reserved"},
      {R"({"tenants": [{"name": "a"}]})",
       "tenant \"a\": api_key_sha256: required (at least one digest)"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["abc"]}]})",
       "tenant \"a\": api_key_sha256[0]: not a SHA-256 digest (64 hex characters)"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A", "$Ag"]}]})",
       "tenant \"a\": api_key_sha256[1]: not a SHA-256 digest (64 hex characters)"},
      {absl::StrCat(R"({"tenants": [{"name": "a", "api_key_sha256": [")",
                    std::string(63, 'a') + "g", R"("]}]})"),
       "tenant \"a\": api_key_sha256[0]: not a SHA-256 digest (64 hex characters)"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A", "$A"]}]})",
       "tenant \"a\": api_key_sha256[1]: this key already belongs to a tenant"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"]},
                       {"name": "b", "api_key_sha256": ["$B", "$A"]}]})",
       "tenant \"b\": api_key_sha256[1]: this key already belongs to a tenant"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"]},
                       {"name": "a", "api_key_sha256": ["$B"]}]})",
       "tenant \"a\": name: appears twice"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "priority": "urgent"}]})",
       "tenant \"a\": priority: \"urgent\" is not critical, standard or sheddable"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "weight": 0}]})",
       "tenant \"a\": weight: must be > 0"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "weight": -1}]})",
       "tenant \"a\": weight: must be > 0"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "max_running_requests": -1}]})",
       "tenant \"a\": max_running_requests: must be >= 0 (0 = no limit)"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "max_queued_requests": -1}]})",
       "tenant \"a\": max_queued_requests: must be >= 0 (0 = no limit)"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "kv_cache_cap_blocks": -1}]})",
       "tenant \"a\": kv_cache_cap_blocks: must be >= 0 (0 = no limit)"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "kv_cache_floor_blocks": -1}]})",
       "tenant \"a\": kv_cache_floor_blocks: must be >= 0 (0 = no limit)"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "tokens_per_minute": -1}]})",
       "tenant \"a\": tokens_per_minute: must be >= 0 (0 = no limit)"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "kv_cache_cap_blocks": 4,
                        "kv_cache_floor_blocks": 5}]})",
       "tenant \"a\": kv_cache_floor_blocks: exceeds kv_cache_cap_blocks"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "burst_tokens": -1}]})",
       "tenant \"a\": burst_tokens: must be >= 0 (0 = no limit)"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "burst_tokens": 10}]})",
       "tenant \"a\": burst_tokens: needs tokens_per_minute"},
      {R"({"tenants": [{"name": "a", "api_key_sha256": ["$A"], "tokens_per_minute": 10,
                        "burst_tokens": 11}]})",
       "tenant \"a\": burst_tokens: exceeds tokens_per_minute"},
  };
  for (const Case& c : cases) {
    const std::string json = absl::StrReplaceAll(c.json, {{"$A", ka}, {"$B", kb}});
    absl::StatusOr<TenantTable> table = ParseTenantsJson(json);
    ASSERT_FALSE(table.ok()) << json;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument) << json;
    const std::string message(table.status().message());
    if (absl::EndsWith(c.message, ": ")) {
      EXPECT_TRUE(absl::StartsWith(message, c.message)) << json << "\n" << message;
      EXPECT_GT(message.size(), c.message.size()) << json;  // the parser says why
    } else {
      EXPECT_EQ(message, c.message) << json;
    }
  }
}

TEST(TenantsFileTest, MissingFileIsNotFoundAndErrorsNameThePath) {
  EXPECT_EQ(LoadTenantsFile("/nonexistent/tenants.json").status().code(),
            absl::StatusCode::kNotFound);
}

TenantTable TwoTenants() {
  return *ParseTenantsJson(
      absl::StrCat(R"({"tenants": [{"name": "a", "api_key_sha256": [")", DigestOf("key-a"),
                   R"("], "tokens_per_minute": 60}, {"name": "b", "api_key_sha256": [")",
                   DigestOf("key-b1"), R"(", ")", DigestOf("key-b2"), R"("]}]})"));
}

std::string NameOf(const absl::StatusOr<Caller>& c) {
  return c.ok() ? c->tenant->engine.name : absl::StatusCodeToString(c.status().code());
}

TEST(TenantRegistryTest, KeysMapToTheirTenantAndAnythingElseIsUnauthenticated) {
  TenantRegistry registry(TwoTenants());
  EXPECT_FALSE(registry.open());
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer key-a")), "a");
  EXPECT_EQ(NameOf(registry.Authenticate("bearer key-a")), "a");  // the scheme is case-blind
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer key-b1")), "b");
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer key-b2")), "b");  // rotated second key
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer key-c")), "UNAUTHENTICATED");
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer Key-a")), "UNAUTHENTICATED");
  EXPECT_EQ(NameOf(registry.Authenticate("key-a")), "UNAUTHENTICATED");
  EXPECT_EQ(NameOf(registry.Authenticate("Basic key-a")), "UNAUTHENTICATED");
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer ")), "UNAUTHENTICATED");
  EXPECT_EQ(NameOf(registry.Authenticate(std::nullopt)), "UNAUTHENTICATED");
  EXPECT_EQ(registry.Authenticate(std::nullopt).status().message(),
            "missing API key: send the metadata 'authorization: Bearer <key>'");
  EXPECT_EQ(registry.Authenticate("Bearer nope").status().message(), "unknown API key");
  // Only the limited tenant has a bucket.
  EXPECT_NE(registry.Authenticate("Bearer key-a")->bucket, nullptr);
  EXPECT_EQ(registry.Authenticate("Bearer key-b1")->bucket, nullptr);
  ASSERT_EQ(registry.EngineTenants().size(), 2u);
  EXPECT_EQ(registry.EngineTenants()[1].name, "b");
}

TEST(TenantRegistryTest, OpenRegistryLetsEveryoneInAsAnonymous) {
  TenantRegistry registry(TenantTable{});
  EXPECT_TRUE(registry.open());
  EXPECT_EQ(NameOf(registry.Authenticate(std::nullopt)), "");
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer anything")), "");
  EXPECT_EQ(registry.Authenticate(std::nullopt)->bucket, nullptr);
  EXPECT_TRUE(registry.EngineTenants().empty());
}

TEST(TenantRegistryTest, SingleKeyTableIsTheAnonymousTenantBehindOneKey) {
  TenantRegistry registry(SingleKeyTable("sesame"));
  EXPECT_FALSE(registry.open());
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer sesame")), "");
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer open")), "UNAUTHENTICATED");
  EXPECT_EQ(NameOf(registry.Authenticate(std::nullopt)), "UNAUTHENTICATED");
  EXPECT_TRUE(registry.EngineTenants().empty());  // the engine sees no tenant table
}

TEST(TenantRegistryTest, ReplaceSwapsKeysAndKeepsBucketsOfTenantsThatStay) {
  absl::Time now = absl::UnixEpoch();
  TenantRegistry registry(TwoTenants(), [&] { return now; });
  const absl::StatusOr<Caller> before = registry.Authenticate("Bearer key-a");
  ASSERT_TRUE(before.ok());
  before->bucket->Charge(100);  // 60 - 100 = -40
  // The reload drops key-b1, adds tenant c, and halves a's rate.
  registry.Replace(*ParseTenantsJson(absl::StrCat(
      R"({"tenants": [{"name": "a", "api_key_sha256": [")", DigestOf("key-a"),
      R"("], "tokens_per_minute": 30}, {"name": "b", "api_key_sha256": [")", DigestOf("key-b2"),
      R"("]}, {"name": "c", "api_key_sha256": [")", DigestOf("key-c"), R"("]}]})")));
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer key-b1")), "UNAUTHENTICATED");
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer key-b2")), "b");
  EXPECT_EQ(NameOf(registry.Authenticate("Bearer key-c")), "c");
  const absl::StatusOr<Caller> after = registry.Authenticate("Bearer key-a");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->bucket, before->bucket);
  EXPECT_EQ(after->bucket->tokens(), -40);
  EXPECT_EQ(after->bucket->tokens_per_minute(), 30);
  // A stream that authenticated before the reload still holds its tenant.
  EXPECT_EQ(before->tenant->tokens_per_minute, 60);
}

TEST(TokenBucketTest, RefillsContinuouslyUpToOneMinuteOfTokens) {
  absl::Time now = absl::UnixEpoch();
  TokenBucket bucket(60, [&] { return now; });  // one token per second
  EXPECT_EQ(bucket.tokens(), 60);
  EXPECT_EQ(bucket.TimeUntilAvailable(), absl::ZeroDuration());
  bucket.Charge(70);
  EXPECT_EQ(bucket.tokens(), -10);
  EXPECT_EQ(bucket.TimeUntilAvailable(), absl::Seconds(11));
  now += absl::Milliseconds(500);
  EXPECT_EQ(bucket.tokens(), -10);  // -9.5 rounds toward minus infinity
  EXPECT_EQ(bucket.TimeUntilAvailable(), absl::Milliseconds(10500));
  now += absl::Milliseconds(9500);
  EXPECT_EQ(bucket.tokens(), 0);
  EXPECT_EQ(bucket.TimeUntilAvailable(), absl::Seconds(1));
  now += absl::Seconds(1);
  EXPECT_EQ(bucket.tokens(), 1);
  EXPECT_EQ(bucket.TimeUntilAvailable(), absl::ZeroDuration());
  now += absl::Minutes(10);
  EXPECT_EQ(bucket.tokens(), 60);  // capped at one minute's worth
  bucket.SetRate(30);
  EXPECT_EQ(bucket.tokens(), 30);  // clipped to the new capacity
  bucket.Charge(30);
  EXPECT_EQ(bucket.TimeUntilAvailable(), absl::Seconds(2));
}

TEST(TokenBucketTest, TryTakeTakesAllOrNothingWithinTheBurst) {
  absl::Time now = absl::UnixEpoch();
  TokenBucket bucket(60, 20, [&] { return now; });  // one token per second, 20 at most
  EXPECT_EQ(bucket.capacity(), 20);
  EXPECT_EQ(bucket.tokens(), 20);
  EXPECT_EQ(bucket.TryTake(21), absl::InfiniteDuration());  // never fits
  EXPECT_EQ(bucket.TryTake(15), absl::ZeroDuration());
  EXPECT_EQ(bucket.tokens(), 5);
  EXPECT_EQ(bucket.TryTake(8), absl::Seconds(3));  // nothing taken
  EXPECT_EQ(bucket.tokens(), 5);
  now += absl::Seconds(3);
  EXPECT_EQ(bucket.TryTake(8), absl::ZeroDuration());
  EXPECT_EQ(bucket.tokens(), 0);
  bucket.Refund(30);
  EXPECT_EQ(bucket.tokens(), 20);  // never above the burst
  now += absl::Minutes(5);
  EXPECT_EQ(bucket.tokens(), 20);
  bucket.SetRate(120, 0);  // burst 0: a minute's worth
  EXPECT_EQ(bucket.capacity(), 120);
  bucket.SetRate(10, 50);  // a burst above the rate is clipped to it
  EXPECT_EQ(bucket.capacity(), 10);
  EXPECT_EQ(bucket.tokens(), 10);
}

TEST(TokenReservationTest, ReservesTheMostARequestCostsAndRefundsTheRest) {
  absl::Time now = absl::UnixEpoch();
  auto bucket = std::make_shared<TokenBucket>(60, [&] { return now; });
  const engine::TokenCost cost{.prompt_tokens = 5, .max_completion_tokens = 10, .n = 2};
  EXPECT_EQ(cost.total(), 25);
  {
    TokenReservation first(bucket, "a"), second(bucket, "a"), third(bucket, "a");
    ASSERT_TRUE(first.Reserve(cost).ok());
    ASSERT_TRUE(second.Reserve(cost).ok());
    EXPECT_EQ(bucket->tokens(), 10);
    const absl::Status refused = third.Reserve(cost);
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(refused.message(),
              "tenant \"a\": tokens_per_minute (60) exceeded; retry in 15s: the request may cost "
              "25 tokens (5 prompt + 2 x 10 completion: max_tokens, or what the context leaves "
              "when it is unset)");
    EXPECT_EQ(RetryDelayOf(refused), absl::Seconds(15));
    first.Use(5);
    first.Use(7);  // stopped early: 13 of 25 unused
    first.Settle();
    EXPECT_EQ(bucket->tokens(), 23);
    first.Settle();  // once only
    first.Use(2);    // after settling: charged as it comes
    EXPECT_EQ(bucket->tokens(), 21);
    second.Use(30);  // beyond the reservation: 5 charged
    EXPECT_EQ(bucket->tokens(), 16);
  }  // the destructors settle: second used more than it reserved, third reserved nothing
  EXPECT_EQ(bucket->tokens(), 16);
  TokenReservation huge(bucket, "a");
  const absl::Status never =
      huge.Reserve({.prompt_tokens = 50, .max_completion_tokens = 11, .n = 1});
  EXPECT_EQ(never.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(never.message(),
            "max_tokens: the request may cost 61 tokens (50 prompt + 11 completion: max_tokens, "
            "or what the context leaves when it is unset), more than tenant \"a\"'s token bucket "
            "holds (60 of tokens_per_minute 60); lower max_tokens");
  TokenReservation unlimited(nullptr, "b");
  EXPECT_TRUE(unlimited.Reserve({.prompt_tokens = 1 << 30, .max_completion_tokens = 1}).ok());
}

TEST(TokenBucketTest, WaitRoundsUpToTheNanosecond) {
  absl::Time now = absl::UnixEpoch();
  TokenBucket bucket(7, [&] { return now; });
  bucket.Charge(7);
  EXPECT_EQ(bucket.tokens(), 0);
  // One token takes 60/7 s = 8571428571.43 ns.
  EXPECT_EQ(bucket.TimeUntilAvailable(), absl::Nanoseconds(8571428572));
  now += absl::Nanoseconds(8571428571);
  EXPECT_EQ(bucket.TimeUntilAvailable(), absl::Nanoseconds(1));
  now += absl::Nanoseconds(1);
  EXPECT_EQ(bucket.TimeUntilAvailable(), absl::ZeroDuration());
}

TEST(TokenBucketTest, HugeRatesDoNotOverflow) {
  absl::Time now = absl::UnixEpoch();
  TokenBucket bucket(int64_t{1} << 40, [&] { return now; });
  EXPECT_EQ(bucket.tokens(), int64_t{1} << 40);
  bucket.Charge(int64_t{1} << 41);
  now += absl::Minutes(2);
  EXPECT_EQ(bucket.tokens(), int64_t{1} << 40);
}

// The google.rpc.RetryInfo a client decodes from a status.
std::optional<absl::Duration> ClientRetryDelay(const grpc::Status& status) {
  google::rpc::Status details;
  if (!grpc::ExtractErrorDetails(status, &details).ok()) return std::nullopt;
  EXPECT_EQ(details.code(), status.error_code());
  EXPECT_EQ(details.message(), status.error_message());
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

TEST(StatusDetailsTest, ResourceExhaustedCarriesRetryInfo) {
  const grpc::Status own = ToGrpcStatusWithDetails(
      WithRetryDelay(absl::ResourceExhaustedError("over"), absl::Milliseconds(2500)));
  EXPECT_EQ(own.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(own.error_message(), "over");
  EXPECT_EQ(ClientRetryDelay(own), absl::Milliseconds(2500));
  const grpc::Status engine = ToGrpcStatusWithDetails(
      absl::ResourceExhaustedError("tenant \"a\": max_queued_requests (8) reached"));
  EXPECT_EQ(engine.error_message(), "tenant \"a\": max_queued_requests (8) reached");
  EXPECT_EQ(ClientRetryDelay(engine), kDefaultRetryDelay);
  const grpc::Status other = ToGrpcStatusWithDetails(absl::InvalidArgumentError("prompt: empty"));
  EXPECT_EQ(other.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(other.error_details().empty());
  EXPECT_EQ(RetryDelayOf(absl::ResourceExhaustedError("x")), std::nullopt);
}

}  // namespace
}  // namespace pagoda::server
