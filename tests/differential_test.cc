// The differential tester (tests/difftest.h) in ctest: a short seeded run that must find
// no difference from the alone runs while covering every feature it mixes, and proof that
// it would catch the bugs it exists for (each injected fault fails it).
#include <gtest/gtest.h>

#include <iostream>

#include "tests/difftest.h"

namespace pagoda::difftest {
namespace {

TEST(DifferentialTest, SeededRoundsEqualTheAloneRuns) {
  Report total;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    total.Add(RunRound(seed, {.requests_per_round = 40}));
  }
  std::cout << total.Summary() << "\n";
  for (const std::string& f : total.failures) ADD_FAILURE() << f;
  EXPECT_GE(total.requests, 800);
  EXPECT_GT(total.finished, 800);
  EXPECT_GT(total.ended, 0);  // reloads that left a stream more than its tenant may hold
  EXPECT_GT(total.aborted, 0);
  EXPECT_GT(total.preemptions, 0);
  EXPECT_GT(total.swap_outs, 0);
  EXPECT_GT(total.prefix_hits, 0);
  EXPECT_GT(total.forks, 0);
  EXPECT_GT(total.reloads, 0);
}

class InjectedFaultTest : public ::testing::TestWithParam<engine::InjectedFault> {};

TEST_P(InjectedFaultTest, FailsTheTester) {
  Report total;
  for (uint64_t seed = 1; seed <= 10 && total.failures.empty(); ++seed) {
    total.Add(RunRound(seed, {.requests_per_round = 36, .fault = GetParam()}));
  }
  std::cout << total.Summary() << "\n";
  ASSERT_FALSE(total.failures.empty());
  std::cout << "first failure: " << total.failures.front() << "\n";
}

INSTANTIATE_TEST_SUITE_P(Faults, InjectedFaultTest,
                         ::testing::Values(engine::InjectedFault::kSkipCopies,
                                           engine::InjectedFault::kReuseBlockEarly,
                                           engine::InjectedFault::kDropChunk));

}  // namespace
}  // namespace pagoda::difftest
