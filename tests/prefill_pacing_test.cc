// Prefill pacing: the PrefillPacer's arithmetic on given step times (no clock), and the
// scheduler applying its limits with exact chunk sizes, across tenants only.
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/prefill_pacer.h"
#include "engine/scheduler.h"
#include "gtest/gtest.h"

namespace pagoda::engine {
namespace {

absl::Duration Ms(double ms) { return absl::Milliseconds(ms); }

TEST(PrefillPacerTest, OffGivesNoLimits) {
  PrefillPacer pacer(0, 2048);
  EXPECT_FALSE(pacer.enabled());
  pacer.OnStep({.long_tokens = 0, .long_seqs = 1, .short_seqs = 1}, Ms(10));
  const PrefillLimits l = pacer.Limits();
  EXPECT_EQ(l.short_len, 0);
  EXPECT_EQ(l.long_chunk, 0);
  EXPECT_FALSE(PrefillPacer(1, 2048).enabled());
}

TEST(PrefillPacerTest, HoldsLongWorkUntilABaselineIsMeasured) {
  PrefillPacer pacer(2, 2048);
  EXPECT_EQ(pacer.Limits().long_chunk, 0);
  EXPECT_EQ(pacer.Limits().short_len, 16);
  EXPECT_EQ(pacer.Limits().heavy_context, PrefillPacer::kHeavyContext);
  // A step with only long work protects nobody: nothing is learned.
  pacer.OnStep({.long_tokens = 100, .long_seqs = 1, .short_seqs = 0}, Ms(500));
  EXPECT_LT(pacer.baseline_ms(), 0);
  pacer.OnStep({.long_tokens = 0, .long_seqs = 1, .short_seqs = 1}, Ms(10));
  EXPECT_DOUBLE_EQ(pacer.baseline_ms(), 10);
  EXPECT_EQ(pacer.Limits().long_chunk, 16);
}

TEST(PrefillPacerTest, DebtHoldsLongWorkUntilShortStepsRepayIt) {
  PrefillPacer pacer(2, 2048);
  pacer.OnStep({.long_tokens = 0, .long_seqs = 1, .short_seqs = 1}, Ms(10));
  // 16 long tokens added 30 ms to a 10 ms baseline: the allowance is (2 - 1) x 10 ms, so
  // 20 ms of debt; one token costs 30/16 ms, and 4 allowances fit 21.33 tokens.
  pacer.OnStep({.long_tokens = 16, .long_seqs = 1, .short_seqs = 1}, Ms(40));
  EXPECT_DOUBLE_EQ(pacer.debt_ms(), 20);
  EXPECT_DOUBLE_EQ(pacer.token_ms(), 30.0 / 16);
  EXPECT_EQ(pacer.chunk(), 21);
  EXPECT_EQ(pacer.Limits().long_chunk, 0);
  EXPECT_EQ(pacer.Limits().short_len, 21);
  // Each step without long work repays one allowance.
  pacer.OnStep({.long_tokens = 0, .long_seqs = 1, .short_seqs = 1}, Ms(10));
  EXPECT_DOUBLE_EQ(pacer.debt_ms(), 10);
  EXPECT_EQ(pacer.Limits().long_chunk, 0);
  pacer.OnStep({.long_tokens = 0, .long_seqs = 1, .short_seqs = 1}, Ms(10));
  EXPECT_DOUBLE_EQ(pacer.debt_ms(), 0);
  EXPECT_EQ(pacer.Limits().long_chunk, 21);
}

TEST(PrefillPacerTest, ManyLongSequencesPerShortOneGetAProportionalAllowance) {
  PrefillPacer pacer(2, 2048);
  pacer.OnStep({.long_tokens = 0, .long_seqs = 3, .short_seqs = 1}, Ms(10));
  // 3 long sequences for 1 short one: 30 ms of allowance covers the 25 ms they added.
  pacer.OnStep({.long_tokens = 3, .long_seqs = 3, .short_seqs = 1}, Ms(35));
  EXPECT_DOUBLE_EQ(pacer.debt_ms(), 0);
  EXPECT_EQ(pacer.Limits().long_chunk, pacer.chunk());
}

TEST(PrefillPacerTest, ChunkAtMostDoublesAndStaysWithinTheBudget) {
  PrefillPacer pacer(2, 40);
  pacer.OnStep({.long_tokens = 0, .long_seqs = 1, .short_seqs = 1}, Ms(10));
  // Long work that costs nothing: the chunk doubles, up to max_chunk.
  pacer.OnStep({.long_tokens = 16, .long_seqs = 1, .short_seqs = 1}, Ms(10));
  EXPECT_EQ(pacer.chunk(), 32);
  pacer.OnStep({.long_tokens = 32, .long_seqs = 1, .short_seqs = 1}, Ms(10));
  EXPECT_EQ(pacer.chunk(), 40);
  // Very expensive long work: one token at least.
  pacer.OnStep({.long_tokens = 1, .long_seqs = 1, .short_seqs = 1}, Ms(100000));
  EXPECT_EQ(pacer.chunk(), 1);
}

TEST(PrefillPacerTest, ProbesTheBaselineAfterKProbeEveryPacedSteps) {
  PrefillPacer pacer(2, 2048);
  pacer.OnStep({.long_tokens = 0, .long_seqs = 1, .short_seqs = 1}, Ms(10));
  for (int i = 0; i < PrefillPacer::kProbeEvery; ++i) {
    ASSERT_GT(pacer.Limits().long_chunk, 0) << i;
    pacer.OnStep({.long_tokens = 1, .long_seqs = 1, .short_seqs = 1}, Ms(12));  // no debt
    ASSERT_DOUBLE_EQ(pacer.debt_ms(), 0);
  }
  EXPECT_EQ(pacer.Limits().long_chunk, 0);
  pacer.OnStep({.long_tokens = 0, .long_seqs = 1, .short_seqs = 1}, Ms(6));
  EXPECT_DOUBLE_EQ(pacer.baseline_ms(), 0.75 * 10 + 0.25 * 6);
  EXPECT_GT(pacer.Limits().long_chunk, 0);
}

TEST(PrefillPacerTest, LongPromptsKeepTheChunkForAWhileAfterAPacedStep) {
  PrefillPacer pacer(2, 2048);
  EXPECT_EQ(pacer.Limits().idle_chunk, 0);  // never paced yet
  pacer.OnStep({.long_tokens = 0, .long_seqs = 1, .short_seqs = 1}, Ms(10));
  EXPECT_EQ(pacer.Limits().idle_chunk, 16);
  for (int i = 0; i < PrefillPacer::kGraceSteps - 1; ++i) {
    pacer.OnStep({.long_tokens = 0, .long_seqs = 0, .short_seqs = 0}, Ms(10));
    ASSERT_EQ(pacer.Limits().idle_chunk, 16) << i;
  }
  pacer.OnStep({.long_tokens = 0, .long_seqs = 0, .short_seqs = 0}, Ms(10));
  EXPECT_EQ(pacer.Limits().idle_chunk, 0);
}

// A scheduler over a KV cache with plenty of blocks; sequences of tenants "a" and "b".
class PacedSchedulerTest : public ::testing::Test {
 protected:
  PacedSchedulerTest()
      : kv_(1000, 4),
        scheduler_({.max_batched_tokens = 512, .max_seqs = 8}, &kv_,
                   std::make_unique<FcfsPolicy>()) {}

  Sequence* Add(const std::string& tenant, int32_t prompt_len) {
    auto seq = std::make_unique<Sequence>();
    seq->id = static_cast<SeqId>(seqs_.size() + 1);
    seq->tokens.assign(prompt_len, 5);
    seq->prompt_len = prompt_len;
    seq->max_total_tokens = prompt_len + 1000;
    seq->request.tenant = tenant;
    scheduler_.Add(seq.get());
    seqs_.push_back(std::move(seq));
    return seqs_.back().get();
  }

  // One step, applied: a chunk that completes its sequence appends a token.
  SchedulerOutput Step() {
    SchedulerOutput out = scheduler_.Schedule();
    std::vector<Sequence*> sampling;
    for (const ScheduledChunk& c : out.chunks) {
      if (c.seq->num_computed + c.num_tokens == c.seq->num_tokens()) sampling.push_back(c.seq);
    }
    scheduler_.OnStepDone(out);
    for (Sequence* s : sampling) s->tokens.push_back(7);
    return out;
  }

  int32_t TokensOf(const SchedulerOutput& out, const Sequence* seq) {
    for (const ScheduledChunk& c : out.chunks) {
      if (c.seq == seq) return c.num_tokens;
    }
    return 0;
  }

  void TearDown() override {
    for (auto& s : seqs_) scheduler_.Remove(s.get());
    EXPECT_EQ(kv_.num_free_blocks(), 1000);
  }

  KvCacheManager kv_;
  Scheduler scheduler_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
};

TEST_F(PacedSchedulerTest, AnotherTenantsLongPromptComputesInChunksBesideADecode) {
  Sequence* decoder = Add("a", 4);
  Step();
  Sequence* prompt = Add("b", 200);
  scheduler_.SetPrefillLimits({.short_len = 8, .long_chunk = 16, .heavy_context = 1000});
  std::vector<int32_t> chunks;
  while (prompt->num_computed < 200) {
    const SchedulerOutput out = Step();
    ASSERT_EQ(TokensOf(out, decoder), 1);
    chunks.push_back(TokensOf(out, prompt));
    if (chunks.back() == 16) {
      EXPECT_EQ(out.paced.long_tokens, 16);
      EXPECT_EQ(out.paced.long_seqs, 1);
      EXPECT_EQ(out.paced.short_seqs, 1);
    }
  }
  // 12 chunks of 16; the last 8 tokens are short work and run whole.
  EXPECT_EQ(chunks, std::vector<int32_t>({16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 8}));
}

TEST_F(PacedSchedulerTest, TheSameTenantsLongPromptIsNotPaced) {
  Sequence* decoder = Add("a", 4);
  Step();
  Sequence* prompt = Add("a", 200);
  scheduler_.SetPrefillLimits({.short_len = 8, .long_chunk = 16, .heavy_context = 1000});
  const SchedulerOutput out = Step();
  EXPECT_EQ(TokensOf(out, decoder), 1);
  EXPECT_EQ(TokensOf(out, prompt), 200);
  EXPECT_EQ(out.paced.long_seqs, 0);
  EXPECT_EQ(out.paced.long_tokens, 0);
}

TEST_F(PacedSchedulerTest, LongWorkWaitsWhileTheChunkIsZeroAndAHeavyDecodeIsLongWork) {
  Sequence* heavy = Add("b", 40);
  scheduler_.SetPrefillLimits({.short_len = 8, .long_chunk = 0, .heavy_context = 32});
  // Alone, a long prompt is never paced.
  EXPECT_EQ(TokensOf(Step(), heavy), 40);
  Sequence* light = Add("a", 4);
  // Its decode reads more than 32 tokens of context: long work, held back.
  SchedulerOutput out = Step();
  EXPECT_EQ(TokensOf(out, light), 4);
  EXPECT_EQ(TokensOf(out, heavy), 0);
  EXPECT_EQ(out.paced.long_seqs, 1);
  EXPECT_EQ(out.paced.short_seqs, 1);
  scheduler_.SetPrefillLimits({.short_len = 8, .long_chunk = 1, .heavy_context = 32});
  out = Step();
  EXPECT_EQ(TokensOf(out, light), 1);
  EXPECT_EQ(TokensOf(out, heavy), 1);
  EXPECT_EQ(out.paced.long_tokens, 1);
}

TEST_F(PacedSchedulerTest, WithNoShortWorkLongPromptsTakeTheIdleChunk) {
  Sequence* prompt = Add("b", 100);
  scheduler_.SetPrefillLimits(
      {.short_len = 8, .long_chunk = 16, .heavy_context = 1000, .idle_chunk = 24});
  EXPECT_EQ(TokensOf(Step(), prompt), 24);
  scheduler_.SetPrefillLimits({.short_len = 8, .long_chunk = 16, .heavy_context = 1000});
  EXPECT_EQ(TokensOf(Step(), prompt), 76);
}

TEST_F(PacedSchedulerTest, AHeldLongPromptDoesNotKeepAnotherTenantWaiting) {
  Sequence* decoder = Add("a", 4);
  Step();
  Sequence* prompt = Add("b", 200);  // first in line
  Sequence* short_prompt = Add("a", 4);
  scheduler_.SetPrefillLimits({.short_len = 8, .long_chunk = 0, .heavy_context = 1000});
  const SchedulerOutput out = Step();
  EXPECT_EQ(TokensOf(out, decoder), 1);
  EXPECT_EQ(TokensOf(out, prompt), 0);
  EXPECT_EQ(TokensOf(out, short_prompt), 4);
}

TEST_F(PacedSchedulerTest, AHoldThatWouldLeaveTheStepEmptyRunsShortLenTokens) {
  // Tenant a's only work is a short prompt its KV cap keeps waiting.
  scheduler_.SetTenants({{.name = "a", .kv_cache_cap_blocks = 1}, {.name = "b"}});
  Sequence* prompt = Add("b", 100);
  Sequence* capped = Add("a", 8);  // needs 2 blocks of 4
  scheduler_.SetPrefillLimits({.short_len = 8, .long_chunk = 0, .heavy_context = 1000});
  const SchedulerOutput out = Step();
  EXPECT_EQ(TokensOf(out, capped), 0);
  EXPECT_EQ(TokensOf(out, prompt), 8);
}

}  // namespace
}  // namespace pagoda::engine
