// A Scheduler driven the way the engine drives it, with a fake model that "samples" token
// 7, checking the per-step invariants (budget, sequence cap, blocks for every chunk); for the
// scheduler's unit tests.
#pragma once

#include <memory>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"
#include "engine/scheduling_policy.h"
#include "gtest/gtest.h"

namespace pagoda::engine {

class SchedulerSim {
 public:
  // `num_host_blocks`: the KV cache manager's swap space (0: preemption recomputes).
  SchedulerSim(int32_t num_blocks, int32_t block_size, SchedulerConfig config,
               int32_t num_host_blocks = 0)
      : kv_(num_blocks, block_size, false, PrefixHasher(), num_host_blocks),
        scheduler_(config, &kv_, std::make_unique<FcfsPolicy>()),
        config_(config) {}

  Sequence* Add(int32_t prompt_len, int32_t output_len, int32_t priority = 0) {
    auto seq = std::make_unique<Sequence>();
    seq->id = next_id_++;
    seq->tokens.assign(prompt_len, 5);
    seq->prompt_len = prompt_len;
    seq->max_total_tokens = prompt_len + output_len;
    seq->request.priority = priority;
    scheduler_.Add(seq.get());
    seqs_.push_back(std::move(seq));
    return seqs_.back().get();
  }

  // One step; returns its output (already applied).
  SchedulerOutput Step() {
    SchedulerOutput out = scheduler_.Schedule();
    EXPECT_LE(out.num_tokens, config_.max_batched_tokens);
    EXPECT_LE(scheduler_.running().size(), static_cast<size_t>(config_.max_seqs));
    int32_t sum = 0;
    std::vector<Sequence*> sampling;
    for (const ScheduledChunk& c : out.chunks) {
      sum += c.num_tokens;
      EXPECT_GE(static_cast<int32_t>(kv_.BlockTable(c.seq->id).size()),
                kv_.BlocksFor(c.seq->num_computed + c.num_tokens));
      if (c.seq->num_computed + c.num_tokens == c.seq->num_tokens()) sampling.push_back(c.seq);
    }
    EXPECT_EQ(sum, out.num_tokens);
    scheduler_.OnStepDone(out);
    for (Sequence* s : sampling) {
      s->tokens.push_back(7);
      if (s->num_tokens() >= s->max_total_tokens) {
        scheduler_.Remove(s);
        ++finished_;
      }
    }
    ++steps_;
    return out;
  }

  // Steps until every sequence finished (at most `max_steps`).
  void RunToEnd(int max_steps = 10000) {
    while (finished_ < static_cast<int>(seqs_.size()) && steps_ < max_steps) Step();
    ASSERT_EQ(finished_, static_cast<int>(seqs_.size()));
  }

  KvCacheManager& kv() { return kv_; }
  Scheduler& scheduler() { return scheduler_; }
  int finished() const { return finished_; }

 private:
  KvCacheManager kv_;
  Scheduler scheduler_;
  SchedulerConfig config_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  SeqId next_id_ = 1;
  int finished_ = 0;
  int steps_ = 0;
};

}  // namespace pagoda::engine
