// A request's grammar state in the engine (engine/grammar_state.h): started once at intake
// (its first mask cached for its samples), forked per sample, and an error, never an empty
// mask, when the grammar allows no token.
#include "engine/grammar_state.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grammar/gbnf.h"
#include "gtest/gtest.h"

namespace pagoda::engine {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const grammar::Grammar> Gbnf(const std::string& text) {
  auto g = grammar::CompileGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

// Issue 44, finding 9: "ab" over a vocabulary with "a" but no "b": after "a" no token
// continues and the grammar cannot end. That is an error, never a "stop" on "a".
TEST(GrammarStateTest, NoAllowedTokenIsAnError) {
  const std::vector<std::string> vocab = {"a", "c", ""};
  const grammar::TokenMasker masker(vocab, {2});
  auto state = StartGrammar(masker, Gbnf("root ::= \"ab\""), {});
  ASSERT_TRUE(state.ok()) << state.status();
  grammar::TokenBitmask mask;
  ASSERT_TRUE(NextMask(masker, /*epoch=*/0, &*state, &mask).ok());
  EXPECT_TRUE(grammar::MaskAllows(mask, 0));
  EXPECT_FALSE(grammar::MaskAllows(mask, 1));
  ASSERT_TRUE(AcceptToken(&*state, "a").ok());
  const absl::Status s = NextMask(masker, /*epoch=*/0, &*state, &mask);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no token of the vocabulary continues the output"));
  // A whole sentence with no end-of-generation token in the vocabulary: an empty mask, OK
  // (the engine stops there: the grammar accepted the output).
  const grammar::TokenMasker no_eos(vocab, {});
  auto whole = StartGrammar(no_eos, Gbnf("root ::= \"a\""), {});
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(AcceptToken(&*whole, "a").ok());
  ASSERT_TRUE(NextMask(no_eos, /*epoch=*/0, &*whole, &mask).ok());
  for (uint64_t w : mask) EXPECT_EQ(w, 0u);
}

// The start and its first mask happen once, at StartGrammar; a fork (another sample) starts
// from the same state and finds that mask in the shared cache at no cost.
TEST(GrammarStateTest, ForksShareTheFirstMask) {
  const std::vector<std::string> vocab = {"x", "y", "xy", ""};
  const grammar::TokenMasker masker(vocab, {3});
  auto state = StartGrammar(masker, Gbnf("root ::= \"x\" [y]*"), {});
  ASSERT_TRUE(state.ok()) << state.status();
  const int64_t started = state->steps();
  EXPECT_GT(started, 0);
  GrammarState fork = state->Fork();
  EXPECT_EQ(fork.cache.get(), state->cache.get());  // one cache for both samples
  const int64_t cached_steps = fork.cache->steps();
  grammar::TokenBitmask mask;
  ASSERT_TRUE(NextMask(masker, /*epoch=*/0, &fork, &mask).ok());
  EXPECT_EQ(fork.cache->hits(), 1u);
  EXPECT_EQ(fork.cache->steps(), cached_steps);  // the first mask cost the fork nothing
  EXPECT_TRUE(grammar::MaskAllows(mask, 0));
  EXPECT_TRUE(grammar::MaskAllows(mask, 2));
  EXPECT_FALSE(grammar::MaskAllows(mask, 1));
  EXPECT_FALSE(grammar::MaskAllows(mask, 3));
  ASSERT_TRUE(AcceptToken(&fork, "xy").ok());
  ASSERT_TRUE(NextMask(masker, /*epoch=*/0, &fork, &mask).ok());
  EXPECT_TRUE(grammar::MaskAllows(mask, 1));
  EXPECT_TRUE(grammar::MaskAllows(mask, 3));  // the end
  // The original is still at the start.
  ASSERT_TRUE(NextMask(masker, /*epoch=*/0, &*state, &mask).ok());
  EXPECT_TRUE(grammar::MaskAllows(mask, 0));
  EXPECT_FALSE(grammar::MaskAllows(mask, 3));
}

// Limits at the start: refused as InvalidArgument (the request's own grammar), naming it.
TEST(GrammarStateTest, StartOverTheLimitsIsInvalidArgument) {
  const std::vector<std::string> vocab = {"a", ""};
  const grammar::TokenMasker masker(vocab, {1});
  std::string text = "root ::= ";
  for (int i = 0; i < 100; ++i) text += (i ? " | \"a" : "\"a") + std::to_string(i) + "\"";
  auto state = StartGrammar(masker, Gbnf(text), {.max_steps_per_byte = 50});
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(state.status().message(), HasSubstr("max_steps_per_byte (50)"));
}

}  // namespace
}  // namespace pagoda::engine
