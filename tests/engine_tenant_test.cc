// The engine with tenants (stories260K): tenant table validation, per-tenant queue limits
// and shedding checked before any engine work, KV caps and floors bounding a request,
// per-tenant stats, and fair-share admission order against FCFS.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/mutex.h"
#include "gtest/gtest.h"
#include "tests/engine_test_util.h"

namespace pagoda {
namespace {

using engine::CollectedOutput;
using engine::CollectingSink;
using engine::FinishReason;
using engine::GenerationRequest;
using engine::PriorityClass;
using engine::TenantConfig;
using testing::GreedyRequest;

TenantConfig Tenant(std::string name) {
  TenantConfig t;
  t.name = std::move(name);
  return t;
}

GenerationRequest For(std::string tenant, GenerationRequest r) {
  r.tenant = std::move(tenant);
  return r;
}

// A request that runs until aborted (up to the context length).
GenerationRequest Long(std::string tenant) {
  GenerationRequest r = GreedyRequest({1, 403}, 1);
  r.max_tokens.reset();
  return For(std::move(tenant), r);
}

const engine::TenantStats* FindStats(const engine::EngineStats& s, const std::string& name) {
  for (const engine::TenantStats& t : s.tenants) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

TEST(EngineTenantTest, SetTenantsRejectsABadTableNamingTheEntry) {
  auto engine = testing::StoriesEngine({.block_size = 16, .num_blocks = 64});
  ASSERT_NE(engine, nullptr);
  struct Case {
    std::vector<TenantConfig> table;
    std::string message;
  };
  TenantConfig zero_weight = Tenant("w");
  zero_weight.weight = 0;
  TenantConfig negative = Tenant("n");
  negative.max_queued_requests = -1;
  TenantConfig floor_over_cap = Tenant("f");
  floor_over_cap.kv_cache_cap_blocks = 4;
  floor_over_cap.kv_cache_floor_blocks = 5;
  TenantConfig big_floor = Tenant("g");
  big_floor.kv_cache_floor_blocks = 40;
  const std::vector<Case> cases = {
      {{Tenant("a"), Tenant("a")}, "tenant \"a\": appears twice"},
      {{zero_weight}, "tenant \"w\": weight must be > 0"},
      {{negative}, "tenant \"n\": limits must be >= 0"},
      {{floor_over_cap}, "tenant \"f\": kv_cache_floor_blocks exceeds kv_cache_cap_blocks"},
      {{big_floor, big_floor}, "appears twice"},
      {{big_floor, Tenant("h")}, ""},
  };
  for (const Case& c : cases) {
    const absl::Status s = engine->SetTenants(c.table);
    if (c.message.empty()) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
      EXPECT_TRUE(absl::StrContains(s.message(), c.message)) << s;
    }
  }
  TenantConfig other = big_floor;
  other.name = "g2";
  const absl::Status s = engine->SetTenants({big_floor, other});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "kv_cache_floor_blocks: floors add up to 80 blocks; the pool has 64");
}

// a may run 1 and queue 1: its third request is turned away before tokenization and does
// no engine work (num_submitted stays); b is unaffected. a's first request holds the engine
// from its sink at its first token, so it is still running (it would end at the context
// length) when the others arrive, however slow this thread is.
TEST(EngineTenantTest, TenantQueueLimitNamesTheLimitAndSparesOthers) {
  auto engine = testing::StoriesEngine({.max_seqs = 1});
  ASSERT_NE(engine, nullptr);
  TenantConfig a = Tenant("a");
  a.max_running_requests = 1;
  a.max_queued_requests = 1;
  ASSERT_TRUE(engine->SetTenants({a, Tenant("b")}).ok());
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  std::vector<engine::RequestHandle> handles;
  std::atomic<int64_t> paused_at_step{-1};
  auto submit = [&](const std::string& tenant) {
    sinks.push_back(std::make_shared<CollectingSink>([&](const engine::GenerationOutput& o) {
      if (!o.token_ids.empty() && paused_at_step.load() < 0) {  // a's first: one runs at a time
        engine->Pause();  // this step finishes and publishes its stats, then nothing runs
        paused_at_step = engine->Stats().num_steps;
      }
    }));
    auto r = engine->Submit(Long(tenant), sinks.back());
    if (r.ok()) {
      handles.push_back(r->handle);
    } else {
      sinks.pop_back();
    }
    return r.status();
  };
  ASSERT_TRUE(submit("a").ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while ((paused_at_step.load() < 0 || engine->Stats().num_steps <= paused_at_step.load()) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(submit("a").ok());  // queued
  EXPECT_EQ(engine->Stats().num_submitted, 2);
  const absl::Status rejected = submit("a");
  EXPECT_EQ(rejected.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(rejected.message(), "tenant \"a\": max_queued_requests (1) reached");
  EXPECT_EQ(engine->Stats().num_submitted, 2);
  EXPECT_TRUE(submit("b").ok());
  EXPECT_EQ(engine->Stats().num_submitted, 3);
  // Per-tenant stats while a runs: the tenants' blocks add up to the blocks in use.
  const engine::EngineStats stats = engine->Stats();
  const engine::TenantStats* sa = FindStats(stats, "a");
  const engine::TenantStats* sb = FindStats(stats, "b");
  ASSERT_NE(sa, nullptr);
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sa->num_running, 1);
  EXPECT_EQ(sa->num_waiting, 1);
  EXPECT_EQ(sb->num_running + sb->num_waiting, 1);
  EXPECT_EQ(sa->num_blocks_held + sb->num_blocks_held, stats.num_blocks - stats.num_free_blocks);
  EXPECT_GT(sa->num_blocks_held, 0);
  for (auto h : handles) engine->Abort(h);
  engine->Resume();
  for (auto& s : sinks) EXPECT_EQ(s->Wait().finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EngineTenantTest, SheddableRequestsAreShedWhileTheQueueIsLong) {
  auto engine = testing::StoriesEngine({.max_seqs = 1, .shed_waiting_requests = 1});
  ASSERT_NE(engine, nullptr);
  TenantConfig s = Tenant("s");
  s.priority = PriorityClass::kSheddable;
  ASSERT_TRUE(engine->SetTenants({s}).ok());
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  std::vector<engine::RequestHandle> handles;
  engine->Pause();  // both wait until the aborts, however slow this thread is
  for (int i = 0; i < 2; ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    auto r = engine->Submit(Long(""), sinks.back());
    ASSERT_TRUE(r.ok()) << r.status();
    handles.push_back(r->handle);
  }
  auto shed = engine->Submit(Long("s"), std::make_shared<CollectingSink>());
  EXPECT_EQ(shed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(
      absl::StartsWith(shed.status().message(), "tenant \"s\": sheddable requests are shed while"))
      << shed.status();
  EXPECT_EQ(engine->Stats().num_submitted, 2);
  for (auto h : handles) engine->Abort(h);
  engine->Resume();
  for (auto& sink : sinks) EXPECT_EQ(sink->Wait().finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
  // With the queue empty the sheddable tenant is served.
  EXPECT_EQ(testing::RunOne(*engine, For("s", GreedyRequest({1, 403}, 3))).token_ids.size(), 3u);
}

TEST(EngineTenantTest, KvCapAndOtherTenantsFloorsBoundARequest) {
  auto engine = testing::StoriesEngine({.block_size = 16, .num_blocks = 8});
  ASSERT_NE(engine, nullptr);
  TenantConfig a = Tenant("a");
  a.kv_cache_cap_blocks = 2;
  TenantConfig f = Tenant("f");
  f.kv_cache_floor_blocks = 5;
  ASSERT_TRUE(engine->SetTenants({a, f}).ok());
  auto capped =
      engine->Submit(For("a", GreedyRequest({1, 403}, 40)), std::make_shared<CollectingSink>());
  EXPECT_EQ(capped.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(capped.status().message(),
            "request needs 42 tokens of KV cache; tenant \"a\"'s kv_cache_cap_blocks (2 blocks) "
            "holds 32");
  auto floored =
      engine->Submit(For("", GreedyRequest({1, 403}, 60)), std::make_shared<CollectingSink>());
  EXPECT_EQ(floored.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(floored.status().message(),
            "request needs 62 tokens of KV cache; the cache beyond other tenants' floors holds 48");
  EXPECT_EQ(engine->Stats().num_submitted, 0);
  // Without max_tokens a request stops where its cap ends.
  GenerationRequest r = For("a", GreedyRequest({1, 403}, 1));
  r.max_tokens.reset();
  EXPECT_EQ(testing::RunOne(*engine, r).token_ids.size(), 30u);
  // f's own floor is its to use: 8 blocks = 128 tokens.
  EXPECT_EQ(testing::RunOne(*engine, For("f", GreedyRequest({1, 403}, 100))).token_ids.size(),
            100u);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EngineTenantTest, StatsCountServedTokensPerTenant) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->SetTenants({Tenant("a"), Tenant("b"), Tenant("idle")}).ok());
  // Prompt tokens plus every output token but the last (never fed back): 3 + 4, 2 + 3.
  testing::RunAll(*engine,
                  {For("a", GreedyRequest({1, 403, 407}, 5)), For("b", GreedyRequest({1, 403}, 4)),
                   For("zed", GreedyRequest({1, 407}, 2))});
  EXPECT_TRUE(testing::WaitForIdle(*engine));
  const engine::EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.num_submitted, 3);
  ASSERT_EQ(stats.tenants.size(), 3u);  // configured ones; zed is gone with its request
  EXPECT_EQ(stats.tenants[0].name, "a");
  EXPECT_EQ(stats.tenants[0].served_tokens, 7);
  EXPECT_EQ(stats.tenants[1].name, "b");
  EXPECT_EQ(stats.tenants[1].served_tokens, 5);
  EXPECT_EQ(stats.tenants[2].name, "idle");
  EXPECT_EQ(stats.tenants[2].served_tokens, 0);
  for (const engine::TenantStats& t : stats.tenants) {
    EXPECT_EQ(t.num_running + t.num_waiting + t.num_blocks_held, 0) << t.name;
  }
}

// One request at a time behind a long one of tenant z: a1, a2, a3 and b1 queue behind it.
// Fair share (on by itself once tenants are set) serves b1 second; FCFS serves it last.
// `clear_table`: the table is set, then replaced by an empty one before any request.
std::vector<std::string> FinishOrder(engine::PolicyKind policy, bool clear_table = false) {
  auto engine = testing::StoriesEngine({.max_seqs = 1, .policy = policy});
  if (engine == nullptr) return {};
  EXPECT_TRUE(engine->SetTenants({Tenant("a"), Tenant("b")}).ok());
  if (clear_table) {
    EXPECT_TRUE(engine->SetTenants({}).ok());
  }
  Mutex mu;
  std::vector<std::string> order;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  Notification z_runs;
  auto submit = [&](const std::string& name, GenerationRequest r) {
    sinks.push_back(std::make_shared<CollectingSink>([&, name](const engine::GenerationOutput& o) {
      // z holds the engine at its first token: the others all queue behind it, however slow
      // this thread is, and z ends by the abort, not at the context length.
      if (name == "z" && !o.token_ids.empty() && !z_runs.HasBeenNotified()) {
        engine->Pause();
        z_runs.Notify();
      }
      MutexLock lock(&mu);
      if (o.finished()) order.push_back(name);
    }));
    auto s = engine->Submit(std::move(r), sinks.back());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->handle : 0;
  };
  const engine::RequestHandle blocker = submit("z", Long("z"));
  z_runs.WaitForNotification();
  for (const char* name : {"a1", "a2", "a3", "b1"}) {
    submit(name, For(std::string(1, name[0]), GreedyRequest({1, 403, 407}, 4)));
  }
  engine->Abort(blocker);
  engine->Resume();
  for (auto& s : sinks) s->Wait();
  MutexLock lock(&mu);
  return order;
}

TEST(EngineTenantTest, FairShareServesTheLightTenantBetweenTheHeavyOnesRequests) {
  EXPECT_EQ(FinishOrder(engine::PolicyKind::kAuto),
            (std::vector<std::string>{"z", "a1", "b1", "a2", "a3"}));
  EXPECT_EQ(FinishOrder(engine::PolicyKind::kFcfs),
            (std::vector<std::string>{"z", "a1", "a2", "a3", "b1"}));
  // kAuto goes back to FCFS when the table empties.
  EXPECT_EQ(FinishOrder(engine::PolicyKind::kAuto, /*clear_table=*/true),
            (std::vector<std::string>{"z", "a1", "a2", "a3", "b1"}));
}

}  // namespace
}  // namespace pagoda
