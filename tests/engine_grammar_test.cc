// Constrained decoding through the engine (stories260K, CPU): with a grammar in the
// sampling parameters every sample ends at an end-of-generation token the grammar allowed,
// and its text parses and validates against the schema (tests/json_schema_checker.h),
// greedy or sampled, one sample or several (forked from one prompt).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/request.h"
#include "gmock/gmock.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine_test_util.h"
#include "tests/json_schema_checker.h"

namespace pagoda::engine {
namespace {

constexpr char kSchema[] = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3},
    "happy": {"type": "boolean"}},
  "required": ["name", "age", "happy"], "additionalProperties": false})";

void ExpectValid(const std::string& text, FinishReason reason, const std::string& where) {
  EXPECT_EQ(reason, FinishReason::kStop) << where << ": " << text;
  const nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(value.is_discarded()) << where << ": " << text;
  const nlohmann::json schema = nlohmann::json::parse(kSchema);
  EXPECT_EQ(grammar::testing::CheckSchema(value, schema, schema), "") << where << ": " << text;
}

TEST(EngineGrammarTest, OutputsFollowTheSchema) {
  auto grammar = grammar::CompileJsonSchema(kSchema);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  auto engine = testing::StoriesEngine();
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 12; ++i) {
    GenerationRequest r;
    r.prompt = "Once upon a time, there was a";
    r.max_tokens = 400;
    r.sampling.temperature = i == 0 ? 0.f : 1.f;
    r.sampling.seed = 1000 + i;
    r.sampling.top_k = i % 3 == 2 ? 5 : 0;
    r.sampling.grammar = *grammar;
    r.n = i % 4 == 3 ? 3 : 1;
    requests.push_back(std::move(r));
  }
  const std::vector<CollectedOutput> outs = testing::RunAll(*engine, std::move(requests));
  for (size_t i = 0; i < outs.size(); ++i) {
    ASSERT_TRUE(outs[i].error.ok()) << outs[i].error;
    if (outs[i].samples.empty()) {
      ExpectValid(outs[i].text, outs[i].finish_reason, "request " + std::to_string(i));
    }
    for (size_t k = 0; k < outs[i].samples.size(); ++k) {
      ExpectValid(outs[i].samples[k].text, outs[i].samples[k].finish_reason,
                  "request " + std::to_string(i) + " sample " + std::to_string(k));
    }
  }
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

// Constrained requests keep their outputs, token for token, when they run together on a
// cache too small for them: preempted (recomputed from the prefix cache, or swapped), n = 2
// forks included (the matcher's state follows the output, never the cache).
TEST(EngineGrammarTest, PreemptionAndPrefixCachingKeepEachOutput) {
  auto grammar = grammar::CompileJsonSchema(kSchema);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  const auto make_requests = [&] {
    std::vector<GenerationRequest> requests;
    for (int i = 0; i < 10; ++i) {
      GenerationRequest r;
      r.prompt = "Once upon a time, there was a";
      r.max_tokens = 90;
      r.sampling.temperature = i == 0 ? 0.f : 1.f;
      r.sampling.seed = 2000 + i;
      r.sampling.grammar = *grammar;
      r.n = i % 4 == 3 ? 2 : 1;
      requests.push_back(std::move(r));
    }
    return requests;
  };
  // Alone: each request on an engine of its own size, one at a time.
  auto alone_engine = testing::StoriesEngine({.block_size = 4});
  std::vector<CollectedOutput> alone;
  for (GenerationRequest& r : make_requests()) {
    alone.push_back(testing::RunOne(*alone_engine, std::move(r)));
  }
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    SCOPED_TRACE(mode == PreemptionMode::kSwap ? "swap" : "recompute");
    auto engine = testing::StoriesEngine(
        {.block_size = 4, .num_blocks = 40, .preemption_mode = mode, .swap_space = 1 << 20});
    const std::vector<CollectedOutput> together = testing::RunAll(*engine, make_requests());
    ASSERT_EQ(together.size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) {
      ASSERT_TRUE(together[i].error.ok()) << together[i].error;
      EXPECT_EQ(together[i].text, alone[i].text) << "request " << i;
      ASSERT_EQ(together[i].samples.size(), alone[i].samples.size()) << "request " << i;
      for (size_t k = 0; k < alone[i].samples.size(); ++k) {
        EXPECT_EQ(together[i].samples[k].text, alone[i].samples[k].text)
            << "request " << i << " sample " << k;
      }
      if (alone[i].samples.empty() && alone[i].finish_reason == FinishReason::kStop) {
        ExpectValid(together[i].text, together[i].finish_reason, "request " + std::to_string(i));
      }
    }
    const EngineStats stats = engine->Stats();
    EXPECT_GT(stats.num_preemptions, 0);
    if (mode == PreemptionMode::kSwap) {
      EXPECT_GT(stats.num_swap_outs, 0);
    } else {
      EXPECT_GT(stats.prefix_cache_hits, 0);  // a recomputed victim finds its blocks cached
    }
    EXPECT_TRUE(testing::WaitForIdle(*engine));
  }
}

TEST(EngineGrammarTest, JsonObjectParses) {
  auto engine = testing::StoriesEngine();
  GenerationRequest r;
  r.prompt = "Once upon a time";
  r.max_tokens = 64;
  r.sampling.temperature = 0.f;
  r.sampling.grammar = grammar::JsonObjectGrammar();
  const CollectedOutput out = testing::RunOne(*engine, std::move(r));
  ASSERT_TRUE(out.error.ok()) << out.error;
  ASSERT_FALSE(out.text.empty());
  EXPECT_EQ(out.text[0], '{') << out.text;
  if (out.finish_reason == FinishReason::kStop) {
    EXPECT_TRUE(nlohmann::json::parse(out.text, nullptr, false).is_object()) << out.text;
  }
}

// `root ::= "PREFIX" l0` over 2^8 distinct parse stacks (l_i ::= l_i+1 "1" | l_i+1 "2"):
// over max_heads = 64 as soon as l0 is expanded. With 30 "a"s before it the limit is met
// only mid-generation (the first mask, at intake, sees no further than a token spells);
// with none, at the start.
std::shared_ptr<const grammar::Grammar> AmbiguousAfter(const std::string& prefix) {
  std::string text = absl::StrCat("root ::= \"", prefix, "\" l0\n");
  if (prefix.empty()) text = "root ::= l0\n";
  for (int i = 0; i < 8; ++i) {
    absl::StrAppend(&text, "l", i, " ::= l", i + 1, " \"1\" | l", i + 1, " \"2\"\n");
  }
  auto grammar = grammar::CompileGbnf(text + "l8 ::= \"c\"\n");
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  return grammar.ok() ? *grammar : nullptr;
}

// A stories engine whose grammars may have 64 parse positions a byte.
std::unique_ptr<Engine> SmallHeadsEngine() {
  EngineConfig config;
  config.grammar_limits.max_heads = 64;
  return testing::StoriesEngine(config);
}

// Issue 44, findings 1 and 9: a grammar over its limits mid-generation ends its own request
// with an error naming the limit (never a "stop" on text the grammar did not accept), and a
// request beside it runs to its end; every block is free after.
TEST(EngineGrammarTest, GrammarOverItsLimitsEndsOnlyItsRequest) {
  const std::shared_ptr<const grammar::Grammar> grammar = AmbiguousAfter(std::string(30, 'a'));
  ASSERT_NE(grammar, nullptr);
  auto engine = SmallHeadsEngine();
  GenerationRequest constrained;
  constrained.prompt = "Once upon a time";
  constrained.max_tokens = 100;
  constrained.sampling.temperature = 0.f;
  constrained.sampling.grammar = grammar;
  GenerationRequest beside;
  beside.prompt = "Once upon a time";
  beside.max_tokens = 60;
  beside.ignore_eos = true;
  beside.sampling.temperature = 0.f;
  std::vector<GenerationRequest> requests;
  requests.push_back(std::move(constrained));
  requests.push_back(std::move(beside));
  const std::vector<CollectedOutput> outs = testing::RunAll(*engine, std::move(requests));
  EXPECT_EQ(outs[0].finish_reason, FinishReason::kError);
  EXPECT_EQ(outs[0].error.code(), absl::StatusCode::kInvalidArgument) << outs[0].error;
  EXPECT_THAT(outs[0].error.message(), ::testing::HasSubstr("max_heads (64)"));
  EXPECT_EQ(outs[0].text, std::string(outs[0].text.size(), 'a'));
  EXPECT_GT(outs[0].text.size(), 0u);
  EXPECT_LT(outs[0].text.size(), 31u);
  ASSERT_TRUE(outs[1].error.ok()) << outs[1].error;
  EXPECT_EQ(outs[1].finish_reason, FinishReason::kLength);
  EXPECT_EQ(outs[1].token_ids.size(), 60u);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

// A grammar over its limits at its start is refused by Submit, on the caller's thread:
// nothing reaches the engine.
TEST(EngineGrammarTest, GrammarOverItsLimitsAtItsStartIsRefusedAtSubmit) {
  const std::shared_ptr<const grammar::Grammar> grammar = AmbiguousAfter("");
  ASSERT_NE(grammar, nullptr);
  auto engine = SmallHeadsEngine();
  GenerationRequest r;
  r.prompt = "Once upon a time";
  r.max_tokens = 10;
  r.sampling.grammar = grammar;
  auto submitted = engine->Submit(std::move(r), std::make_shared<CollectingSink>());
  ASSERT_FALSE(submitted.ok());
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(submitted.status().message(), ::testing::HasSubstr("max_heads (64)"));
  EXPECT_EQ(engine->Stats().num_submitted, 0);
}

// What a tenant's constrained requests cost is counted for it (TenantStats::grammar_steps).
TEST(EngineGrammarTest, GrammarStepsAreChargedToTheTenant) {
  auto grammar = grammar::CompileJsonSchema(kSchema);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  auto engine = testing::StoriesEngine();
  ASSERT_TRUE(engine->SetTenants({TenantConfig{.name = "t"}, TenantConfig{.name = "u"}}).ok());
  GenerationRequest r;
  r.prompt = "Once upon a time";
  r.max_tokens = 40;
  r.tenant = "t";
  r.sampling.temperature = 0.f;
  r.sampling.grammar = *grammar;
  const CollectedOutput out = testing::RunOne(*engine, std::move(r));
  ASSERT_TRUE(out.error.ok()) << out.error;
  EXPECT_TRUE(testing::WaitForIdle(*engine));
  int64_t t_steps = -1, u_steps = -1;
  for (const TenantStats& ts : engine->Stats().tenants) {
    if (ts.name == "t") t_steps = ts.grammar_steps;
    if (ts.name == "u") u_steps = ts.grammar_steps;
  }
  EXPECT_GT(t_steps, 0);
  EXPECT_EQ(u_steps, 0);
}

// Issue 44, finding 8: Detokenize takes at most kMaxDetokenizeIds ids, whatever the door.
TEST(EngineGrammarTest, DetokenizeIsCapped) {
  auto engine = testing::StoriesEngine();
  const std::vector<int32_t> ids(Engine::kMaxDetokenizeIds + 1, 5);
  auto text = engine->Detokenize(ids);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(), "token_ids: 1048577 ids; at most 1048576 are accepted");
  EXPECT_TRUE(engine->Detokenize(std::vector<int32_t>(1000, 5)).ok());
}

}  // namespace
}  // namespace pagoda::engine
