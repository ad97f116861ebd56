// The profiling hooks: ProfilingBackend forwards every op unchanged (bit-identical results),
// labels MatMul by the weight's NameWeight role and counts calls; the engine's StepObserver
// sees every step with its batch shape, and profiling leaves greedy tokens unchanged.
#include <memory>
#include <random>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/profiling_backend.h"
#include "tests/engine_test_util.h"

namespace pagoda {
namespace {

using kernels::ProfilingBackend;

std::unique_ptr<kernels::Backend> Cpu() {
  auto b = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 2});
  EXPECT_TRUE(b.ok()) << b.status();
  return *std::move(b);
}

TEST(ProfilingBackendTest, ForwardsMatMulAndLabelsByWeightRole) {
  ProfilingBackend prof(Cpu());
  std::unique_ptr<kernels::Backend> plain = Cpu();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> w(24 * 16), x(3 * 16);
  for (float& v : w) v = dist(rng);
  for (float& v : x) v = dist(rng);
  std::vector<float> got(3 * 24), want(3 * 24);
  for (int pass = 0; pass < 2; ++pass) {
    kernels::Backend& be = pass == 0 ? static_cast<kernels::Backend&>(prof) : *plain;
    auto wt = be.CreateWeight(w.data(), 24, 16);
    auto other = be.CreateWeight(w.data(), 24, 16);
    auto xt = be.AllocateTensor(kernels::DType::kF32, 3, 16);
    auto out = be.AllocateTensor(kernels::DType::kF32, 3, 24);
    ASSERT_TRUE(wt.ok() && other.ok() && xt.ok() && out.ok());
    be.NameWeight(wt->view, "down");
    ASSERT_TRUE(be.CopyToDevice(xt->view.data, x.data(), x.size() * 4).ok());
    be.MatMul(xt->view, wt->view, out->view);
    be.MatMul(xt->view, wt->view, out->view);
    be.MatMul(xt->view, other->view, out->view);
    ASSERT_TRUE(be.ReadF32(out->view, pass == 0 ? got.data() : want.data()).ok());
  }
  EXPECT_EQ(got, want);
  const std::vector<ProfilingBackend::OpTime> times = prof.TakeTimes();
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].label, "matmul down");
  EXPECT_EQ(times[0].calls, 2);
  EXPECT_EQ(times[1].label, "matmul ?");
  EXPECT_EQ(times[1].calls, 1);
  EXPECT_EQ(times[2].label, "read_logits");
  EXPECT_TRUE(prof.TakeTimes().empty());  // taken means reset
}

TEST(ProfilingBackendTest, DisabledRecordsNothing) {
  ProfilingBackend prof(Cpu());
  prof.set_enabled(false);
  auto a = prof.AllocateTensor(kernels::DType::kF32, 2, 8);
  auto b = prof.AllocateTensor(kernels::DType::kF32, 2, 8);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(prof.Zero(a->view.data, 64).ok());
  ASSERT_TRUE(prof.Zero(b->view.data, 64).ok());
  prof.Add(a->view, b->view);
  EXPECT_TRUE(prof.Synchronize().ok());
  EXPECT_TRUE(prof.TakeTimes().empty());
}

// Records each step's batch shape.
class Recorder final : public engine::StepObserver {
 public:
  void OnStep(const engine::StepTiming& t) override {
    absl::MutexLock lock(&mu_);
    steps_.push_back({t.num_seqs, t.num_tokens});
    EXPECT_GE(t.total, t.execute);
  }
  std::vector<std::pair<int32_t, int32_t>> steps() {
    absl::MutexLock lock(&mu_);
    return steps_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<int32_t, int32_t>> steps_;
};

TEST(StepObserverTest, SeesEveryStepAndLeavesTokensUnchanged) {
  Recorder recorder;
  std::vector<engine::CollectedOutput> observed, plain;
  std::vector<engine::GenerationRequest> requests;
  for (int i = 0; i < 3; ++i) {
    requests.push_back(testing::GreedyRequest({1, 5 + i, 9, 11 + i, 40}, 4));
  }
  {
    auto e = testing::PresetEngine("tiny", {.step_observer = &recorder});
    observed = testing::RunAll(*e, requests);
    ASSERT_TRUE(testing::WaitForIdle(*e));
    e->Stop();
    EXPECT_EQ(static_cast<int64_t>(recorder.steps().size()), e->Stats().num_steps);
  }
  {
    auto e = testing::PresetEngine("tiny");
    plain = testing::RunAll(*e, requests);
  }
  ASSERT_EQ(observed.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(observed[i].token_ids, plain[i].token_ids);
  // 3 x 5 prompt tokens and 3 x 3 decode tokens (the first output comes from the prefill),
  // however the requests' arrival split them into steps; the last step is pure decode.
  int32_t tokens = 0;
  for (const auto& [seqs, n] : recorder.steps()) {
    EXPECT_GE(n, seqs);
    tokens += n;
  }
  EXPECT_EQ(tokens, 24);
  ASSERT_FALSE(recorder.steps().empty());
  EXPECT_EQ(recorder.steps().back().first, recorder.steps().back().second);
}

}  // namespace
}  // namespace pagoda
