// FairSharePolicy and tenant quotas in the Scheduler with no model: exact admission orders
// and preemption victims for tenants of weights 1/2/4, counter lifting, priority classes,
// KV caps and floors, and every block free again at the end of each scenario.
#include "engine/fair_share_policy.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda::engine {
namespace {

using ::testing::ElementsAre;

TenantConfig Tenant(std::string name, double weight,
                    PriorityClass priority = PriorityClass::kStandard) {
  TenantConfig t;
  t.name = std::move(name);
  t.weight = weight;
  t.priority = priority;
  return t;
}

// Drives a Scheduler the way the engine does (a fake model "samples" token 7), naming each
// sequence after its tenant ("a1", "a2", ...) and recording admissions and victims.
class TenantSim {
 public:
  TenantSim(int32_t num_blocks, int32_t block_size, SchedulerConfig config,
            const std::vector<TenantConfig>& tenants, bool fair_share = true)
      : kv_(num_blocks, block_size), config_(config) {
    std::unique_ptr<SchedulingPolicy> policy;
    if (fair_share) {
      auto fair = std::make_unique<FairSharePolicy>();
      fair_ = fair.get();
      policy = std::move(fair);
    } else {
      policy = std::make_unique<FcfsPolicy>();
    }
    scheduler_ = std::make_unique<Scheduler>(config, &kv_, std::move(policy));
    scheduler_->SetTenants(tenants);
  }

  Sequence* Add(const std::string& tenant, int32_t prompt_len, int32_t output_len,
                int32_t priority = 0) {
    auto seq = std::make_unique<Sequence>();
    seq->id = next_id_++;
    seq->request.tenant = tenant;
    seq->request.priority = priority;
    seq->tokens.assign(prompt_len, 5);
    seq->prompt_len = prompt_len;
    seq->max_total_tokens = prompt_len + output_len;
    names_[seq.get()] = absl::StrCat(tenant, ++per_tenant_[tenant]);
    scheduler_->Add(seq.get());
    seqs_.push_back(std::move(seq));
    return seqs_.back().get();
  }

  // One step, applied; checks the quota invariants.
  SchedulerOutput Step() {
    SchedulerOutput out = scheduler_->Schedule();
    EXPECT_LE(out.num_tokens, config_.max_batched_tokens);
    for (Sequence* v : out.preempted) victims_.push_back(names_[v]);
    std::vector<Sequence*> sampling;
    for (const ScheduledChunk& c : out.chunks) {
      if (c.seq->num_computed == 0) admissions_.push_back(names_[c.seq]);
      if (c.seq->num_computed + c.num_tokens == c.seq->num_tokens()) sampling.push_back(c.seq);
    }
    CheckQuotas();
    scheduler_->OnStepDone(out);
    for (Sequence* s : sampling) {
      s->tokens.push_back(7);
      if (s->num_tokens() >= s->max_total_tokens) {
        scheduler_->Remove(s);
        ++finished_;
      }
    }
    ++steps_;
    return out;
  }

  void RunToEnd(int max_steps = 10000) {
    while (finished_ < static_cast<int>(seqs_.size()) && steps_ < max_steps) Step();
    ASSERT_EQ(finished_, static_cast<int>(seqs_.size()));
    EXPECT_EQ(kv_.num_free_blocks(), kv_.num_blocks());
    const std::vector<TenantState>& tenants = scheduler_->tenants();
    for (size_t i = 0; i < tenants.size(); ++i) {
      EXPECT_EQ(scheduler_->blocks_held(static_cast<int32_t>(i)), 0) << tenants[i].config.name;
      EXPECT_FALSE(tenants[i].active()) << tenants[i].config.name;
    }
  }

  // Blocks the running sequences of `tenant` hold, counted from their block tables.
  int32_t BlocksOf(const std::string& tenant) const {
    int32_t n = 0;
    for (const Sequence* s : scheduler_->running()) {
      if (s->request.tenant == tenant) n += static_cast<int32_t>(kv_.BlockTable(s->id).size());
    }
    return n;
  }
  double Counter(const std::string& tenant) const {
    return fair_->counter(scheduler_->FindTenant(tenant));
  }
  std::vector<std::string> Running() {
    std::vector<std::string> names;
    for (Sequence* s : scheduler_->running()) names.push_back(names_[s]);
    return names;
  }

  KvCacheManager& kv() { return kv_; }
  Scheduler& scheduler() { return *scheduler_; }
  const std::vector<std::string>& admissions() const { return admissions_; }
  const std::vector<std::string>& victims() const { return victims_; }

 private:
  // Caps hold, per-tenant accounting matches the block tables, and every tenant's unused
  // floor is still free.
  void CheckQuotas() {
    int32_t unused_floors = 0, held = 0;
    const std::vector<TenantState>& tenants = scheduler_->tenants();
    for (size_t i = 0; i < tenants.size(); ++i) {
      const TenantState& t = tenants[i];
      const int32_t t_held = scheduler_->blocks_held(static_cast<int32_t>(i));
      EXPECT_EQ(t_held, BlocksOf(t.config.name)) << t.config.name;
      if (t.config.kv_cache_cap_blocks > 0) {
        EXPECT_LE(t_held, t.config.kv_cache_cap_blocks) << t.config.name;
      }
      if (t.config.max_running_requests > 0) {
        EXPECT_LE(t.num_running, t.config.max_running_requests) << t.config.name;
      }
      unused_floors += std::max(0, t.config.kv_cache_floor_blocks - t_held);
      held += t_held;
    }
    EXPECT_GE(kv_.num_free_blocks(), unused_floors);
    EXPECT_EQ(held, kv_.num_blocks() - kv_.num_free_blocks());
  }

  KvCacheManager kv_;
  SchedulerConfig config_;
  std::unique_ptr<Scheduler> scheduler_;
  FairSharePolicy* fair_ = nullptr;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  std::map<const Sequence*, std::string> names_;
  std::map<std::string, int> per_tenant_;
  std::vector<std::string> admissions_, victims_;
  SeqId next_id_ = 1;
  int finished_ = 0;
  int steps_ = 0;
};

const std::vector<TenantConfig> kWeights124 = {Tenant("a", 1), Tenant("b", 2), Tenant("c", 4)};

// One request at a time (max_seqs 1), each a 4-token prompt and one output token, so each
// costs 4 prompt tokens: 4 / weight on its tenant's counter.
TEST(FairSharePolicyTest, AdmissionFollowsWeights124) {
  TenantSim sim(100, 4, {.max_batched_tokens = 64, .max_seqs = 1}, kWeights124);
  for (const char* t : {"a", "b", "c"}) {
    for (int i = 0; i < 4; ++i) sim.Add(t, 4, 1);
  }
  sim.RunToEnd();
  // Counters (a, b, c) before each pick: (0,0,0) a1; (4,0,0) b1 (tie with c, queued first);
  // (4,2,0) c1; (4,2,1) c2; (4,2,2) b2 (tie, queued first); (4,4,2) c3; (4,4,3) c4, c done;
  // (4,4) a2; (8,4) b3; (8,6) b4, b done; a3; a4.
  EXPECT_THAT(sim.admissions(),
              ElementsAre("a1", "b1", "c1", "c2", "b2", "c3", "c4", "a2", "b3", "b4", "a3", "a4"));
  EXPECT_EQ(sim.Counter("a"), 16);
  EXPECT_EQ(sim.Counter("b"), 8);
  EXPECT_EQ(sim.Counter("c"), 4);
  EXPECT_TRUE(sim.victims().empty());
}

// Long run, tenants of weights 1/2/4 with work in proportion (40, 80, 160 requests of a
// 16-token prompt and 8 output tokens: 16 * 1 + 7 * 2 = 30 each) and at most 4 running.
// A tenant is admitted only at the lowest counter and then gains at most what its running
// requests cost, so while all have requests waiting, c_i - c_j <= 4 * 30 / w_i.
TEST(FairSharePolicyTest, BackloggedCountersStayWithinTheBound) {
  TenantSim sim(1000, 4, {.max_batched_tokens = 64, .max_seqs = 4}, kWeights124);
  const std::vector<std::pair<std::string, int>> work = {{"a", 40}, {"b", 80}, {"c", 160}};
  for (int i = 0; i < 160; ++i) {
    for (const auto& [name, n] : work) {
      if (i < n) sim.Add(name, 16, 8);
    }
  }
  auto all_waiting = [&] {
    for (const TenantState& t : sim.scheduler().tenants()) {
      if (t.num_waiting == 0) return false;
    }
    return true;
  };
  int steps = 0;
  while (all_waiting()) {
    sim.Step();
    ++steps;
    for (const auto& [i, ni] : work) {
      const double wi = kWeights124[sim.scheduler().FindTenant(i)].weight;
      for (const auto& [j, nj] : work) {
        EXPECT_LE(sim.Counter(i) - sim.Counter(j), 4 * 30 / wi) << i << " vs " << j;
      }
    }
  }
  // Each tenant's whole work is 1200 normalized tokens: the first to run out of waiting
  // requests has at most 4 in flight (<= 120), the others trail it by at most 120.
  for (const auto& [name, n] : work) EXPECT_GE(sim.Counter(name), 960) << name;
  EXPECT_GT(steps, 500);
  sim.RunToEnd();
}

TEST(FairSharePolicyTest, FcfsIgnoresWeights) {
  TenantSim sim(100, 4, {.max_batched_tokens = 64, .max_seqs = 1}, kWeights124,
                /*fair_share=*/false);
  for (const char* t : {"a", "b", "c"}) {
    for (int i = 0; i < 2; ++i) sim.Add(t, 4, 1);
  }
  sim.RunToEnd();
  EXPECT_THAT(sim.admissions(), ElementsAre("a1", "a2", "b1", "b2", "c1", "c2"));
}

TEST(FairSharePolicyTest, PrefillAndDecodeTokensAreWeighted) {
  // Tenant b (weight 2): a 6-token prompt in chunks of 4 and 2 (budget 4), then 3 output
  // tokens, two of which are fed back as decode steps: (4 + 2) * 1 / 2 + 2 * 2 / 2 = 5.
  TenantSim sim(100, 4, {.max_batched_tokens = 4, .max_seqs = 4}, kWeights124);
  sim.Add("b", 6, 3);
  const std::vector<double> expected = {2, 3, 4, 5};
  for (double e : expected) {
    sim.Step();
    EXPECT_EQ(sim.Counter("b"), e);
  }
  sim.RunToEnd();
  EXPECT_EQ(sim.scheduler().tenants()[sim.scheduler().FindTenant("b")].served_tokens, 8);
}

// 8 blocks of 4 tokens hold a1, b1, c1, a2 (2 blocks each) exactly; c1 (8-token prompt)
// needs a third block first. The victim is from the tenant with the highest counter (a),
// newest first (a2), not the newest sequence overall (c1, FCFS's choice).
TEST(FairSharePolicyTest, VictimIsNewestOfTenantFurthestOverItsShare) {
  TenantSim sim(8, 4, {.max_batched_tokens = 64, .max_seqs = 8}, kWeights124);
  sim.Add("a", 6, 6);
  sim.Add("a", 6, 6);
  sim.Add("b", 6, 6);
  Sequence* c1 = sim.Add("c", 8, 6);
  sim.Step();
  // Counters before each pick: (0,0,0) a1; (6,0,0) b1; (6,3,0) c1; (6,3,2) a2.
  EXPECT_THAT(sim.admissions(), ElementsAre("a1", "b1", "c1", "a2"));
  EXPECT_EQ(sim.kv().num_free_blocks(), 0);
  const SchedulerOutput out = sim.Step();  // counters a 12, b 3, c 2
  EXPECT_THAT(sim.victims(), ElementsAre("a2"));
  EXPECT_THAT(sim.kv().BlockTable(c1->id), ElementsAre(4, 5, 7));  // a2 freed 7 then 6
  EXPECT_THAT(sim.Running(), ElementsAre("a1", "b1", "c1"));
  EXPECT_EQ(out.chunks.size(), 3u);
  EXPECT_EQ(sim.Counter("a"), 14);   // + one decode token (2)
  EXPECT_EQ(sim.Counter("b"), 4);    // + 2 / 2
  EXPECT_EQ(sim.Counter("c"), 2.5);  // + 2 / 4
  sim.RunToEnd();
}

TEST(FairSharePolicyTest, FcfsVictimInTheSameScenarioIsTheNewest) {
  TenantSim sim(8, 4, {.max_batched_tokens = 64, .max_seqs = 8}, kWeights124,
                /*fair_share=*/false);
  sim.Add("a", 6, 6);
  sim.Add("a", 6, 6);
  sim.Add("b", 6, 6);
  sim.Add("c", 8, 6);
  sim.Step();
  sim.Step();
  EXPECT_THAT(sim.victims(), ElementsAre("c1"));
  sim.RunToEnd();
}

// Tenant a runs alone for a while; b, idle all along, arrives later and is lifted to a's
// counter instead of spending credit banked while idle.
TEST(FairSharePolicyTest, CounterIsLiftedWhenATenantBecomesBacklogged) {
  TenantSim sim(100, 4, {.max_batched_tokens = 64, .max_seqs = 1},
                {Tenant("a", 1), Tenant("b", 1)});
  for (int i = 0; i < 3; ++i) sim.Add("a", 4, 1);
  for (int i = 0; i < 3; ++i) sim.Step();
  EXPECT_EQ(sim.Counter("a"), 12);  // a is idle now, nobody is backlogged
  EXPECT_EQ(sim.Counter("b"), 0);
  sim.Add("b", 4, 1);
  sim.Add("b", 4, 1);
  EXPECT_EQ(sim.Counter("b"), 12);  // lifted to the last idle counter of its class
  sim.Add("a", 4, 1);
  sim.Add("a", 4, 1);
  EXPECT_EQ(sim.Counter("a"), 12);  // lifted to the lowest backlogged counter (b's)
  for (int i = 0; i < 4; ++i) sim.Step();
  // Without the lift b (at 0) would run b1 and b2 first.
  EXPECT_THAT(sim.admissions(), ElementsAre("a1", "a2", "a3", "b1", "a4", "b2", "a5"));
  EXPECT_EQ(sim.Counter("a"), 20);
  EXPECT_EQ(sim.Counter("b"), 20);
  // b comes back while a is idle (last idle counter 20), runs one (b 24), then a returns
  // with b backlogged: a is lifted from 20 to 24 and b4, queued first, wins the tie.
  sim.Add("b", 4, 1);
  sim.Add("b", 4, 1);
  sim.Step();
  EXPECT_EQ(sim.Counter("b"), 24);
  sim.Add("a", 4, 1);
  EXPECT_EQ(sim.Counter("a"), 24);
  sim.RunToEnd();
  EXPECT_THAT(sim.admissions(),
              ElementsAre("a1", "a2", "a3", "b1", "a4", "b2", "a5", "b3", "b4", "a6"));
}

TEST(FairSharePolicyTest, PriorityClassesComeFirst) {
  TenantSim sim(100, 4, {.max_batched_tokens = 64, .max_seqs = 1},
                {Tenant("x", 1, PriorityClass::kCritical), Tenant("a", 4),
                 Tenant("s", 4, PriorityClass::kSheddable)});
  sim.Add("s", 4, 1);
  sim.Add("a", 4, 1);
  sim.Add("x", 4, 1);
  sim.Add("x", 4, 1);
  sim.Add("a", 4, 1);
  sim.RunToEnd();
  // Every critical request first even though x's counter (4 per request at weight 1) is
  // above a's and s's; sheddable last.
  EXPECT_THAT(sim.admissions(), ElementsAre("x1", "x2", "a1", "a2", "s1"));
}

TEST(FairSharePolicyTest, SheddableIsPreemptedBeforeCriticalWhateverTheCounters) {
  TenantSim sim(
      4, 4, {.max_batched_tokens = 64, .max_seqs = 4},
      {Tenant("x", 1, PriorityClass::kCritical), Tenant("s", 4, PriorityClass::kSheddable)});
  sim.Add("s", 8, 4);
  sim.Add("x", 8, 4);
  sim.Step();
  EXPECT_THAT(sim.admissions(), ElementsAre("x1", "s1"));
  EXPECT_EQ(sim.Counter("x"), 8);
  EXPECT_EQ(sim.Counter("s"), 2);
  sim.Step();  // x1 needs a third block
  EXPECT_THAT(sim.victims(), ElementsAre("s1"));
  sim.RunToEnd();
}

// Tenant a may hold 3 blocks. a1 (2 blocks) and a2 (1 block) fill its cap and a3 waits
// while b, uncapped, is admitted past it; when a1 needs a third block, a preempts its own
// newest sequence (a2), not b's.
TEST(FairSharePolicyTest, CapIsNeverExceeded) {
  TenantConfig a = Tenant("a", 1);
  a.kv_cache_cap_blocks = 3;
  TenantSim sim(10, 4, {.max_batched_tokens = 64, .max_seqs = 8}, {a, Tenant("b", 1)});
  Sequence* a1 = sim.Add("a", 8, 4);
  Sequence* a2 = sim.Add("a", 4, 4);
  sim.Add("a", 4, 4);
  Sequence* b1 = sim.Add("b", 4, 4);
  sim.Step();
  // Counters before each pick: a1 (0,0); b1 (8,0); a2 (8,4); a3 blocked by the cap.
  EXPECT_THAT(sim.admissions(), ElementsAre("a1", "b1", "a2"));
  EXPECT_THAT(sim.kv().BlockTable(a1->id), ElementsAre(0, 1));
  EXPECT_THAT(sim.kv().BlockTable(b1->id), ElementsAre(2));
  EXPECT_THAT(sim.kv().BlockTable(a2->id), ElementsAre(3));
  EXPECT_EQ(sim.BlocksOf("a"), 3);
  sim.Step();
  EXPECT_THAT(sim.victims(), ElementsAre("a2"));
  EXPECT_THAT(sim.kv().BlockTable(a1->id), ElementsAre(0, 1, 4));
  EXPECT_THAT(sim.kv().BlockTable(b1->id), ElementsAre(2, 5));
  EXPECT_EQ(sim.BlocksOf("a"), 3);
  EXPECT_EQ(sim.kv().num_free_blocks(), 5);  // free, but not a's
  sim.RunToEnd();
}

TEST(FairSharePolicyTest, MaxRunningRequestsLimitsAdmissionOnly) {
  TenantConfig a = Tenant("a", 1);
  a.max_running_requests = 2;
  TenantSim sim(100, 4, {.max_batched_tokens = 64, .max_seqs = 8}, {a, Tenant("b", 1)});
  for (int i = 0; i < 3; ++i) sim.Add("a", 4, 2);
  sim.Add("b", 4, 2);
  sim.Step();
  EXPECT_THAT(sim.admissions(), ElementsAre("a1", "b1", "a2"));
  sim.RunToEnd();
  EXPECT_THAT(sim.admissions(), ElementsAre("a1", "b1", "a2", "a3"));
}

// b's floor of 3 blocks stays free while b is idle: a gets 8 - 3 = 5 blocks and grows into
// none of b's; b is admitted at once when it comes.
TEST(FairSharePolicyTest, IdleTenantsFloorStaysFree) {
  TenantConfig b = Tenant("b", 1);
  b.kv_cache_floor_blocks = 3;
  TenantSim sim(8, 4, {.max_batched_tokens = 64, .max_seqs = 8}, {Tenant("a", 1), b});
  sim.Add("a", 8, 4);
  sim.Add("a", 8, 4);
  sim.Add("a", 8, 4);
  sim.Step();
  EXPECT_THAT(sim.admissions(), ElementsAre("a1", "a2"));  // a3 would dip into b's floor
  EXPECT_EQ(sim.kv().num_free_blocks(), 4);
  sim.Step();  // a1 takes the last block outside the floor; a2 preempts itself
  EXPECT_THAT(sim.victims(), ElementsAre("a2"));
  EXPECT_EQ(sim.BlocksOf("a"), 3);
  EXPECT_EQ(sim.kv().num_free_blocks(), 5);
  EXPECT_EQ(sim.Counter("a"), 18);  // a1 8 + a2 8 + one decode token of a1
  Sequence* b1 = sim.Add("b", 12, 2);
  EXPECT_EQ(sim.Counter("b"), 18);  // lifted to a's
  sim.Step();
  // a1's decode token lifts a to 20 before admission: b1 (18) first, into its floor; a2
  // (9 tokens to recompute: 3 blocks) does not fit in the 2 left.
  EXPECT_THAT(sim.admissions(), ElementsAre("a1", "a2", "b1"));
  EXPECT_THAT(sim.kv().BlockTable(b1->id), ElementsAre(5, 6, 7));
  EXPECT_EQ(sim.kv().num_free_blocks(), 2);
  sim.RunToEnd();
}

// b (weight 1) has the highest counter but holds 3 blocks with a floor of 2: preempting
// b1 would leave it below its floor, so a's newest sequence goes instead. Without the
// floor b1 would be the victim.
TEST(FairSharePolicyTest, TenantAtItsFloorIsNotPreempted) {
  for (int32_t floor : {2, 0}) {
    TenantConfig b = Tenant("b", 1);
    b.kv_cache_floor_blocks = floor;
    TenantSim sim(6, 4, {.max_batched_tokens = 64, .max_seqs = 8}, {Tenant("a", 4), b});
    sim.Add("b", 8, 8);
    sim.Add("a", 8, 8);
    sim.Add("a", 4, 8);
    sim.Step();
    // Counters before each pick: b1 (a 0, b 0); a1 (0, 8); a2 (2, 8).
    EXPECT_THAT(sim.admissions(), ElementsAre("b1", "a1", "a2"));
    EXPECT_EQ(sim.kv().num_free_blocks(), 1);
    sim.Step();  // b1 takes the free block; a1 needs one: counters a 3, b 8
    EXPECT_THAT(sim.victims(), ElementsAre(floor > 0 ? "a2" : "b1")) << "floor " << floor;
    sim.RunToEnd();
  }
}

TEST(FairSharePolicyTest, TableChangeKeepsSequencesInFlight) {
  TenantSim sim(100, 4, {.max_batched_tokens = 64, .max_seqs = 8}, kWeights124);
  sim.Add("a", 8, 4);
  sim.Add("zed", 8, 4);  // not in the table: default terms
  sim.Step();
  EXPECT_EQ(sim.scheduler().tenants().size(), 4u);
  TenantConfig a = Tenant("a", 2);
  a.kv_cache_cap_blocks = 3;
  sim.scheduler().SetTenants({a});
  ASSERT_EQ(sim.scheduler().tenants().size(), 2u);  // a, and zed while in flight
  const TenantState& ta = sim.scheduler().tenants()[sim.scheduler().FindTenant("a")];
  EXPECT_EQ(ta.num_running, 1);
  EXPECT_EQ(sim.scheduler().blocks_held(sim.scheduler().FindTenant("a")), 2);
  EXPECT_EQ(ta.served_tokens, 8);
  EXPECT_EQ(sim.Counter("a"), 8);
  sim.RunToEnd();
}

// Every run slot taken by a: b, below its share (2 of 4 slots at equal weights), takes
// a's newest slot for each request up to its share; beyond it, b waits. FCFS never does.
TEST(FairSharePolicyTest, TenantBelowItsShareOfRunSlotsTakesOneFromTheTenantAbove) {
  for (bool fair : {true, false}) {
    SCOPED_TRACE(fair ? "fair share" : "fcfs");
    TenantSim sim(64, 4, {.max_batched_tokens = 64, .max_seqs = 4},
                  {Tenant("a", 1), Tenant("b", 1)}, fair);
    for (int i = 0; i < 6; ++i) sim.Add("a", 4, 8);
    sim.Step();
    EXPECT_THAT(sim.Running(), ElementsAre("a1", "a2", "a3", "a4"));
    sim.Add("b", 4, 8);
    sim.Step();
    if (fair) {
      EXPECT_THAT(sim.victims(), ElementsAre("a4"));
      EXPECT_THAT(sim.Running(), ElementsAre("a1", "a2", "a3", "b1"));
    } else {
      EXPECT_TRUE(sim.victims().empty());
      EXPECT_THAT(sim.Running(), ElementsAre("a1", "a2", "a3", "a4"));
    }
    sim.Add("b", 4, 8);
    sim.Add("b", 4, 8);
    sim.Step();
    if (fair) {
      // b2 takes a3's slot; b3 would put b above its share: it waits.
      EXPECT_THAT(sim.victims(), ElementsAre("a4", "a3"));
      EXPECT_THAT(sim.Running(), ElementsAre("a1", "a2", "b1", "b2"));
    }
    sim.RunToEnd();
  }
}

// Issue 14, finding 12: a request's priority orders admission within its tenant (lower
// first, ties in queue order) and never across tenants: b's -100 does not jump a's queue.
TEST(FairSharePolicyTest, PriorityOrdersAdmissionWithinATenantOnly) {
  for (bool fair : {true, false}) {
    SCOPED_TRACE(fair ? "fair share" : "fcfs");
    TenantSim sim(64, 4, {.max_batched_tokens = 64, .max_seqs = 1},
                  {Tenant("a", 1), Tenant("b", 1)}, fair);
    sim.Add("a", 4, 1, /*priority=*/5);
    sim.Add("a", 4, 1, /*priority=*/0);
    sim.Add("a", 4, 1, /*priority=*/3);
    sim.Add("a", 4, 1, /*priority=*/0);
    sim.Add("b", 4, 1, /*priority=*/-100);
    sim.RunToEnd();
    if (fair) {  // a and b alternate by counter; within a, priority then queue order
      EXPECT_THAT(sim.admissions(), ElementsAre("a2", "b1", "a4", "a3", "a1"));
    } else {  // a's place in line is its first request's; a fills it by priority
      EXPECT_THAT(sim.admissions(), ElementsAre("a2", "a4", "a3", "a1", "b1"));
    }
  }
}

// Issue 14, finding 12: b marks its request priority -1000 to never be preempted; the
// victim is still chosen between tenants as without priorities (the newer b1 here, the
// counters being equal), and priority only picks among a tenant's own sequences.
TEST(FairSharePolicyTest, RequestPriorityDoesNotEscapePreemption) {
  for (bool fair : {true, false}) {
    SCOPED_TRACE(fair ? "fair share" : "fcfs");
    // 4 blocks of 4 slots: two sequences growing to 12 tokens (3 blocks each) do not fit.
    TenantSim sim(4, 4, {.max_batched_tokens = 64, .max_seqs = 4}, {Tenant("a", 1), Tenant("b", 1)},
                  fair);
    sim.Add("a", 4, 8, /*priority=*/0);
    sim.Add("b", 4, 8, /*priority=*/-1000);
    for (int step = 0; step < 100 && sim.victims().empty(); ++step) sim.Step();
    ASSERT_FALSE(sim.victims().empty());
    EXPECT_EQ(sim.victims().front(), "b1");
    sim.RunToEnd();
  }
}

// Within one tenant, the request priority picks the victim: a2 (priority 0) outlives the
// older a1 (priority 7).
TEST(FairSharePolicyTest, WithinATenantTheHighestPriorityValueIsPreemptedFirst) {
  for (bool fair : {true, false}) {
    SCOPED_TRACE(fair ? "fair share" : "fcfs");
    TenantSim sim(4, 4, {.max_batched_tokens = 64, .max_seqs = 4}, {Tenant("a", 1)}, fair);
    sim.Add("a", 4, 8, /*priority=*/7);
    sim.Add("a", 4, 8, /*priority=*/0);
    for (int step = 0; step < 100 && sim.victims().empty(); ++step) sim.Step();
    ASSERT_FALSE(sim.victims().empty());
    EXPECT_EQ(sim.victims().front(), "a1");
    sim.RunToEnd();
  }
}

}  // namespace
}  // namespace pagoda::engine
