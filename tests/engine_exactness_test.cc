// Regression tests of issue 22 on the real engine (make-model's tiny preset): a step that
// only swaps out still runs its copies, and a tenant reload that leaves a stream with less
// KV cache than it holds ends it with an explicit error instead of stalling the engine; and
// a swap space larger than the host can give is refused.
#include <atomic>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "model/gguf.h"
#include "tests/engine_test_util.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using engine::CollectedOutput;
using engine::CollectingSink;
using engine::FinishReason;
using engine::GenerationRequest;
using testing::GreedyRequest;

// Calls `action` on the engine thread once, after step `at`.
class AtStep final : public engine::StepObserver {
 public:
  AtStep(int64_t at, std::function<void()> action) : at_(at), action_(std::move(action)) {}
  void OnStep(const engine::StepTiming&) override {
    if (++steps_ == at_) action_();
  }

 private:
  int64_t at_;
  std::function<void()> action_;
  int64_t steps_ = 0;
};

std::vector<int32_t> Prompt(int32_t n, int32_t salt) {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < n; ++i) p.push_back(3 + (i * 37 + salt * 101) % 500);
  return p;
}

GenerationRequest For(std::string tenant, GenerationRequest r) {
  r.tenant = std::move(tenant);
  return r;
}

// Issue 22, item 2: tenant x's 1,100-token prompt fills a pool of 72 blocks, y's short request
// arrives after the first step, and under pacing limits that hold long work back x preempts
// itself (swapping out 3 blocks) in a step that runs nothing else. Those copies must run:
// both requests return exactly the tokens they return alone.
TEST(EngineExactnessTest, ASwapOutInAStepWithNoChunkKeepsTheVictimsTokens) {
  for (const char* dtype : {"f32", "f16"}) {
    SCOPED_TRACE(dtype);
    const int64_t block_bytes = 2 * 2 * 16 * 2 * 16 * (std::string(dtype) == "f32" ? 4 : 2);
    const GenerationRequest x = For("x", GreedyRequest(Prompt(1100, 1), 10));
    const GenerationRequest y = For("y", GreedyRequest(Prompt(3, 2), 60));
    engine::EngineConfig alone_config{.block_size = 16, .num_blocks = 160, .kv_cache_dtype = dtype};
    auto alone = testing::PresetEngine("tiny", alone_config);
    ASSERT_NE(alone, nullptr);
    const CollectedOutput x_alone = testing::RunOne(*alone, x);
    const CollectedOutput y_alone = testing::RunOne(*alone, y);
    ASSERT_EQ(x_alone.token_ids.size(), 10u);
    ASSERT_EQ(y_alone.token_ids.size(), 60u);

    std::atomic<engine::Engine*> mixed_engine{nullptr};
    auto y_sink = std::make_shared<CollectingSink>();
    AtStep submit_y(1, [&] { ASSERT_TRUE(mixed_engine.load()->Submit(y, y_sink).ok()); });
    engine::EngineConfig config{.block_size = 16,
                                .num_blocks = 72,
                                .kv_cache_dtype = dtype,
                                .preemption_mode = engine::PreemptionMode::kSwap,
                                .swap_space = 8 * block_bytes,
                                .step_observer = &submit_y};
    config.prefill_limits_override = [] {
      return engine::PrefillLimits{.short_len = 16, .long_chunk = 0, .heavy_context = 1024};
    };
    auto mixed = testing::PresetEngine("tiny", config);
    ASSERT_NE(mixed, nullptr);
    mixed->Pause();  // y must arrive after x's first step, not with it
    auto x_sink = std::make_shared<CollectingSink>();
    mixed_engine = mixed.get();
    ASSERT_TRUE(mixed->SetTenants({{.name = "x"}, {.name = "y"}}).ok());
    ASSERT_TRUE(mixed->Submit(x, x_sink).ok());
    mixed->Resume();
    const CollectedOutput x_mixed = x_sink->Wait();
    const CollectedOutput y_mixed = y_sink->Wait();
    EXPECT_EQ(x_mixed.token_ids, x_alone.token_ids);
    EXPECT_EQ(y_mixed.token_ids, y_alone.token_ids);
    const engine::EngineStats stats = mixed->Stats();
    EXPECT_GT(stats.num_swap_outs, 0);
    EXPECT_EQ(stats.num_swap_ins, stats.num_swap_outs);
    EXPECT_TRUE(testing::WaitForIdle(*mixed));
    EXPECT_EQ(mixed->Stats().num_free_swap_blocks, 8);
  }
}

struct ReloadCase {
  std::vector<engine::TenantConfig> before, after;
  std::string holder;  // what the error names
};

// Issue 22, item 4: a reload that leaves tenant a's stream (10 + 1,000 tokens, 128 blocks of
// 16) with 20 blocks ends it the step its 321st token would need a 21st block: 311 tokens,
// then RESOURCE_EXHAUSTED naming the limit. The engine goes on: every block comes back and
// the next request runs.
TEST(EngineExactnessTest, AReloadBelowWhatAStreamHoldsEndsItNamingTheLimit) {
  const std::vector<ReloadCase> cases = {
      {{{.name = "a"}},
       {{.name = "a", .kv_cache_cap_blocks = 20}},
       "tenant \"a\"'s kv_cache_cap_blocks (20 blocks) holds 20"},
      {{{.name = "a"}, {.name = "b"}},
       {{.name = "a"}, {.name = "b", .kv_cache_floor_blocks = 108}},
       "the cache beyond other tenants' floors holds 20"},
  };
  for (const ReloadCase& c : cases) {
    SCOPED_TRACE(c.holder);
    std::atomic<engine::Engine*> target{nullptr};
    AtStep reload(50, [&] { ASSERT_TRUE(target.load()->SetTenants(c.after).ok()); });
    auto engine = testing::PresetEngine(
        "tiny", {.block_size = 16, .num_blocks = 128, .step_observer = &reload});
    ASSERT_NE(engine, nullptr);
    target = engine.get();
    ASSERT_TRUE(engine->SetTenants(c.before).ok());
    auto sink = std::make_shared<CollectingSink>();
    ASSERT_TRUE(engine->Submit(For("a", GreedyRequest(Prompt(10, 3), 1000)), sink).ok());
    CollectedOutput out;
    ASSERT_TRUE(sink->WaitFor(absl::Seconds(60), &out)) << "the stream stalled";
    EXPECT_EQ(out.finish_reason, FinishReason::kError);
    EXPECT_EQ(out.error.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(absl::StrContains(out.error.message(), c.holder)) << out.error;
    EXPECT_EQ(out.token_ids.size(), 311u);
    EXPECT_TRUE(testing::WaitForIdle(*engine));
    const CollectedOutput next = testing::RunOne(*engine, For("a", GreedyRequest({1, 5}, 4)));
    EXPECT_EQ(next.finish_reason, FinishReason::kLength);
  }
}

// Issue 25: a swap space the host cannot give is refused at start-up, naming the flag.
TEST(EngineExactnessTest, ASwapSpaceBeyondTheHostMemoryIsRefused) {
  auto file = gguf::GgufFile::Open(testing::ModelPath("stories260K.gguf"));
  ASSERT_TRUE(file.ok());
  auto backend = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 1});
  ASSERT_TRUE(backend.ok());
  auto engine = engine::Engine::Create({.num_blocks = 16,
                                        .preemption_mode = engine::PreemptionMode::kSwap,
                                        .swap_space = int64_t{1} << 60},
                                       *std::move(file), *std::move(backend));
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(engine.status().message(), "host memory available"))
      << engine.status();
  EXPECT_TRUE(absl::StrContains(engine.status().message(), "--swap-space")) << engine.status();
}

}  // namespace
}  // namespace pagoda
