// One source of defaults: the engine `pagoda serve` and `pagoda generate` build when no
// engine flag is given is EngineConfig{}, the engine the tests build (tools/engine_flags.h
// reads every default from it). A field added to either side without the other fails here.
#include "tools/engine_flags.h"

#include <algorithm>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "gtest/gtest.h"

namespace pagoda::tools {
namespace {

// The flags as parsed from `args` (none: the defaults).
EngineFlags Parse(std::vector<std::string> args) {
  CLI::App app;
  EngineFlags flags;
  AddEngineFlags(&app, &flags);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
  return flags;
}

TEST(EngineFlagsTest, NoFlagsGiveEngineConfigDefaults) {
  absl::StatusOr<engine::EngineConfig> got = EngineConfigFromFlags(Parse({}));
  ASSERT_TRUE(got.ok()) << got.status();
  const engine::EngineConfig want;
  EXPECT_EQ(got->block_size, want.block_size);
  EXPECT_EQ(got->num_blocks, want.num_blocks);
  EXPECT_EQ(got->kv_cache_memory, want.kv_cache_memory);
  EXPECT_EQ(got->max_batched_tokens, want.max_batched_tokens);
  EXPECT_EQ(got->max_seqs, want.max_seqs);
  EXPECT_EQ(got->max_queued_requests, want.max_queued_requests);
  EXPECT_EQ(got->shed_waiting_requests, want.shed_waiting_requests);
  EXPECT_EQ(got->kv_cache, want.kv_cache);
  EXPECT_EQ(got->enable_prefix_caching, want.enable_prefix_caching);
  EXPECT_EQ(got->kv_cache_dtype, want.kv_cache_dtype);
  EXPECT_EQ(got->kv_cache_fp8_scale, want.kv_cache_fp8_scale);
  EXPECT_EQ(got->policy, want.policy);
  EXPECT_EQ(got->preemption_mode, want.preemption_mode);
  EXPECT_EQ(got->swap_space, want.swap_space);
  EXPECT_EQ(got->max_decode_slowdown, want.max_decode_slowdown);
  EXPECT_EQ(got->max_prompt_bytes, want.max_prompt_bytes);
  EXPECT_EQ(got->max_stop_strings, want.max_stop_strings);
  EXPECT_EQ(got->max_stop_string_bytes, want.max_stop_string_bytes);
  EXPECT_EQ(got->chat_template, want.chat_template);
  EXPECT_EQ(got->tool_call_format, want.tool_call_format);
  // The product's defaults, spelled out: a change here is a change users see.
  EXPECT_EQ(want.max_decode_slowdown, 1.5);
  EXPECT_EQ(want.preemption_mode, engine::PreemptionMode::kAuto);
  EXPECT_EQ(want.max_queued_requests, 1024);
}

TEST(EngineFlagsTest, FlagsOverrideAndEnumSpellingsRoundTrip) {
  absl::StatusOr<engine::EngineConfig> got =
      EngineConfigFromFlags(Parse({"--preemption-mode", "recompute", "--scheduling-policy", "fair",
                                   "--max-decode-slowdown", "0", "--kv-cache", "off"}));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->preemption_mode, engine::PreemptionMode::kRecompute);
  EXPECT_EQ(got->policy, engine::PolicyKind::kFairShare);
  EXPECT_EQ(got->max_decode_slowdown, 0);
  EXPECT_FALSE(got->kv_cache);
  for (auto mode : {engine::PreemptionMode::kRecompute, engine::PreemptionMode::kSwap,
                    engine::PreemptionMode::kAuto}) {
    auto c =
        EngineConfigFromFlags(Parse({"--preemption-mode", EngineFlags::PreemptionModeFlag(mode)}));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->preemption_mode, mode);
  }
  for (auto kind :
       {engine::PolicyKind::kAuto, engine::PolicyKind::kFcfs, engine::PolicyKind::kFairShare}) {
    auto c =
        EngineConfigFromFlags(Parse({"--scheduling-policy", EngineFlags::PolicyKindFlag(kind)}));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->policy, kind);
  }
  EXPECT_THROW(Parse({"--preemption-mode", "sometimes"}), CLI::ValidationError);
}

}  // namespace
}  // namespace pagoda::tools
