// Hostile grammars and schemas (issue 44): each shape that froze or crashed the daemon is
// now either followed within a small, exact-bounded amount of work or refused with an error
// naming the limit. Costs are asserted through the matcher's and the builder's counters
// (expansion steps, grammar size), never the clock.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grammar/gbnf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "gtest/gtest.h"

namespace pagoda::grammar {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Grammar> Gbnf(const std::string& text) {
  auto g = CompileGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

std::shared_ptr<const Grammar> Schema(const std::string& text) {
  auto g = CompileJsonSchema(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

// Finding 1: `a_i ::= a_{i+1} | a_{i+1}`, 40 levels: 2^40 paths to one position. Each
// reference is expanded once per byte, so the start costs a step or two per level.
TEST(GrammarBudgetTest, AlternationChainCostsLinearSteps) {
  std::string text = "root ::= a0\n";
  for (int i = 0; i < 40; ++i) absl::StrAppend(&text, "a", i, " ::= a", i + 1, " | a", i + 1, "\n");
  absl::StrAppend(&text, "a40 ::= \"x\"\n");
  const auto g = Gbnf(text);
  ASSERT_NE(g, nullptr);
  Matcher m(g);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m.num_heads(), 1u);
  EXPECT_LE(m.steps(), 4 * 41);
  EXPECT_TRUE(m.Advance("x"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_LE(m.steps(), 4 * 41 + 2);
}

// Finding 1: a $defs chain of anyOf's of two identical $refs, 30 deep (2^30 paths; each
// level is two subschemas deep, and the compiler's depth limit is 64).
TEST(GrammarBudgetTest, IdenticalRefAlternativesCostLinearSteps) {
  std::string defs;
  for (int i = 0; i < 30; ++i) {
    absl::StrAppend(&defs, i ? "," : "", "\"d", i, "\": {\"anyOf\": [{\"$ref\": \"#/$defs/d", i + 1,
                    "\"}, {\"$ref\": \"#/$defs/d", i + 1, "\"}]}");
  }
  const auto g = Schema(absl::StrCat(R"({"$defs": {)", defs,
                                     R"(, "d30": {"type": "boolean"}}, "$ref": "#/$defs/d0"})"));
  ASSERT_NE(g, nullptr);
  Matcher m(g);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m.num_heads(), 2u);  // "t" of true, "f" of false
  EXPECT_LE(m.steps(), 8 * 31);
  EXPECT_TRUE(m.Advance("false"));
  EXPECT_TRUE(m.CanEnd());
}

// Finding 1: nested nullable quantifiers in a pattern (51-byte schema).
TEST(GrammarBudgetTest, NestedOptionalQuantifiersStayCheap) {
  const auto g = Schema(R"({"type":"string","pattern":"^((a?){0,7}){0,7}$"})");
  ASSERT_NE(g, nullptr);
  Matcher m(g);
  ASSERT_TRUE(m.ok()) << m.status();
  const int64_t start = m.steps();
  EXPECT_LE(start, 2000);
  ASSERT_TRUE(m.Advance("\""));
  for (int i = 0; i < 49; ++i) ASSERT_TRUE(m.Advance("a")) << i;
  EXPECT_FALSE(m.Advance("a"));  // 50 > 7 x 7
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m.Advance("\""));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_LE(m.steps() - start, 51 * 2000);
}

// Finding 2: `root ::= e e ... e "x"` (32 e's), `e ::= "" | ""`: 2^32 paths, each of which
// pushed a frame.
TEST(GrammarBudgetTest, NullableProductCostsLinearSteps) {
  std::string text = "root ::=";
  for (int i = 0; i < 32; ++i) absl::StrAppend(&text, " e");
  absl::StrAppend(&text, " \"x\"\ne ::= \"\" | \"\"\n");
  const auto g = Gbnf(text);
  ASSERT_NE(g, nullptr);
  Matcher m(g);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m.num_heads(), 1u);
  EXPECT_LE(m.steps(), 8 * 33);
  EXPECT_LE(m.arena_size(), 33u);
  EXPECT_TRUE(m.Advance("x"));
  EXPECT_TRUE(m.CanEnd());
}

// A grammar whose stacks really differ at every level (2^n distinct parse positions) goes
// over max_heads: an error naming the limit and the rule, and nothing accepted after it.
TEST(GrammarBudgetTest, DistinctStacksPastMaxHeadsFailTheMatcher) {
  std::string text = "root ::= \"a\" l0\n";
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&text, "l", i, " ::= l", i + 1, " \"1\" | l", i + 1, " \"2\"\n");
  }
  absl::StrAppend(&text, "l20 ::= \"c\"\n");
  const auto g = Gbnf(text);
  ASSERT_NE(g, nullptr);
  Matcher m(g);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m.Advance("a"));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(m.status().message(), HasSubstr("max_heads (4096)"));
  EXPECT_THAT(m.status().message(), HasSubstr("rule 'l"));
  EXPECT_FALSE(m.Advance("a"));  // failed for good
  // Within a smaller budget, at the start already.
  Matcher small(Gbnf("root ::= l0\n" + text.substr(text.find('\n') + 1)),
                MatcherLimits{.max_heads = 64});
  EXPECT_FALSE(small.ok());
  EXPECT_THAT(small.status().message(), HasSubstr("max_heads (64)"));
  EXPECT_TRUE(small.IsDone());
}

TEST(GrammarBudgetTest, StepsPerByteAreBounded) {
  // 600 distinct-stack alternatives: within max_heads, over 500 steps for one byte.
  std::string text = "root ::= \"a\" (";
  for (int i = 0; i < 600; ++i) absl::StrAppend(&text, i ? " | " : "", "x \"", i, "\"");
  absl::StrAppend(&text, ")\nx ::= \"b\"\n");
  Matcher m(Gbnf(text), MatcherLimits{.max_steps_per_byte = 500});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m.Advance("a"));
  EXPECT_THAT(m.status().message(), HasSubstr("max_steps_per_byte (500)"));
  Matcher enough(Gbnf(text));
  EXPECT_TRUE(enough.Advance("ab1"));
}

// Finding 7: thousands of alternatives: one byte costs about one step per alternative, not
// their square (heads are deduplicated by hash).
TEST(GrammarBudgetTest, ManyAlternativesCostLinearSteps) {
  std::string text = "root ::= ";
  for (int i = 0; i < 3000; ++i) absl::StrAppend(&text, i ? " | " : "", "\"k", i, "\" [a-z]");
  Matcher m(Gbnf(text));
  ASSERT_TRUE(m.ok()) << m.status();
  const int64_t start = m.steps();
  ASSERT_TRUE(m.Advance("k"));
  EXPECT_EQ(m.num_heads(), 3000u);  // the second byte of every key
  EXPECT_LE(m.steps() - start, 2 * 3000);
  ASSERT_TRUE(m.Advance("2999"));
  EXPECT_EQ(m.num_heads(), 1u);
}

// Findings 7 and 9: an enum is a byte trie: 100,000 equal values are one, and 5,000
// distinct strings leave one parse position whatever their number.
TEST(GrammarBudgetTest, EnumsAreTries) {
  std::string zeros = R"({"enum": [0)";
  for (int i = 1; i < 100000; ++i) zeros += ",0";
  Matcher z(Schema(zeros + "]}"));
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z.num_heads(), 1u);
  EXPECT_LE(z.steps(), 4);
  EXPECT_TRUE(z.Advance("0"));
  EXPECT_TRUE(z.CanEnd());

  std::string strings = R"({"enum": [)";
  for (int i = 0; i < 5000; ++i) absl::StrAppend(&strings, i ? "," : "", "\"value-", i, "\"");
  const auto g = Schema(strings + "]}");
  ASSERT_NE(g, nullptr);
  Matcher m(g);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m.num_heads(), 1u);
  ASSERT_TRUE(m.Advance("\"value-4"));
  EXPECT_LE(m.num_heads(), 11u);  // the next digit, or the closing quote of "value-4"
  ASSERT_TRUE(m.Advance("999\""));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.Advance("x"));
  Matcher p(g);
  EXPECT_FALSE(p.Advance("\"value-5000"));
  // As an object property the trie gives valid JSON only.
  Matcher o(Schema(absl::StrCat(R"({"type": "object", "properties": {"c": )", strings,
                                "]}}, \"required\": [\"c\"]}")));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o.Advance(R"({"c": "value-17"})"));
  EXPECT_TRUE(o.CanEnd());
}

// Finding 3: the pattern compiler recursed once per '(' with no limit.
TEST(GrammarBudgetTest, DeeplyNestedPatternGroupsAreRefused) {
  const std::string pattern = std::string(20000, '(') + "a" + std::string(20000, ')');
  auto g = CompileJsonSchema(absl::StrCat(R"({"type": "string", "pattern": ")", pattern, "\"}"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("groups nested deeper than 64 in pattern"));
  const std::string ok = std::string(64, '(') + "a" + std::string(64, ')');
  EXPECT_TRUE(
      CompileJsonSchema(absl::StrCat(R"({"type": "string", "pattern": "^)", ok, "$\"}")).ok());
}

// Finding 4: a type list repeating "string" with maxLength 2048 compiled the string rule
// once per entry before any budget check.
TEST(GrammarBudgetTest, TypeListsAreCheckedAsTheyCompile) {
  std::string types = "\"string\"";
  for (int i = 0; i < 4000; ++i) types += ", \"string\"";
  auto repeated =
      CompileJsonSchema(absl::StrCat(R"({"type": [)", types, R"(], "maxLength": 2048})"));
  ASSERT_FALSE(repeated.ok());
  EXPECT_THAT(repeated.status().message(), HasSubstr("names 'string' twice"));
  // Distinct members past the budget: refused as soon as the grammar is over it.
  SchemaLimits small;
  small.max_elements = 3000;
  auto over = CompileJsonSchema(
      R"({"type": ["string", "array"], "maxLength": 2048, "maxItems": 2048})", small);
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.status().message(), HasSubstr("grammar over 3000 elements"));
}

// The builder itself stops growing at its limit, inside a single call that would add more.
TEST(GrammarBudgetTest, BuilderNeverGrowsPastItsLimit) {
  GrammarBuilder b(1000);
  const int32_t rule = b.Repeat("r", b.Byte('a'), 0, 2048);
  EXPECT_TRUE(b.over_limit());
  EXPECT_LE(b.size(), 1000u);
  auto built = std::move(b).Build(rule);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().message(), "grammar over 1000 elements");
}

// Finding 8: schema text goes through the same linear pre-check as an HTTP body: 16 MiB of
// '[' is refused before any parse.
TEST(GrammarBudgetTest, SchemaTextIsCheckedBeforeParsing) {
  auto deep = CompileJsonSchema(std::string(16 << 20, '['));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(), "json schema: JSON nests deeper than 160 arrays and objects");
  auto huge = CompileJsonSchema(std::string((16 << 20) + 1, ' '));
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("bytes; at most 16777216"));
}

// The samples of one request share a MaskCache: a state one of them met costs the others
// a lookup, no expansion step.
TEST(GrammarBudgetTest, SamplesShareMaskWork) {
  const std::vector<std::string> vocab = {"{", "\"", "a", "}", ":", "1", ""};
  TokenMasker masker(vocab, {6});
  const auto g = Schema(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
  MaskCache cache;
  Matcher first(g), second(g);
  TokenBitmask a, b;
  ASSERT_TRUE(masker.FillMask(first, &a, &cache).ok());
  const int64_t steps = cache.steps();
  EXPECT_GT(steps, 0);
  ASSERT_TRUE(masker.FillMask(second, &b, &cache).ok());
  EXPECT_EQ(cache.steps(), steps);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(a, b);
}

// A mask walks the vocabulary's trie: its steps are bounded per mask, and a walk past the
// bound is an error, the mask left empty.
TEST(GrammarBudgetTest, MaskStepsAreBounded) {
  std::vector<std::string> vocab;
  for (int i = 0; i < 300; ++i) vocab.push_back(absl::StrCat("k", i));
  vocab.push_back("");
  TokenMasker masker(vocab, {300});
  std::string text = "root ::= ";
  for (int i = 0; i < 300; ++i) absl::StrAppend(&text, i ? " | " : "", "\"k", i, "\"");
  const auto g = Gbnf(text);
  MaskCache cache;
  TokenBitmask mask;
  Matcher m(g, MatcherLimits{.max_steps_per_mask = 50});
  const absl::Status s = masker.FillMask(m, &mask, &cache);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("max_steps_per_mask (50)"));
  for (uint64_t w : mask) EXPECT_EQ(w, 0u);
  Matcher fine(g);
  MaskCache other;
  ASSERT_TRUE(masker.FillMask(fine, &mask, &other).ok());
  EXPECT_TRUE(MaskAllows(mask, 0));
  EXPECT_TRUE(MaskAllows(mask, 299));
  EXPECT_FALSE(MaskAllows(mask, 300));
}

}  // namespace
}  // namespace pagoda::grammar

namespace pagoda::grammar {
namespace {

// The masks of one engine step of one request (its samples, at different states) share one
// max_steps_per_mask through their MaskCache's epoch: n samples cost what one mask may.
TEST(GrammarBudgetTest, MasksOfOneEpochShareOneBudget) {
  std::vector<std::string> vocab = {"a", "b", "!", "?"};
  std::string x = "x ::= ";
  for (int i = 0; i < 300; ++i) {
    vocab.push_back(absl::StrCat("k", i));
    absl::StrAppend(&x, i ? " | " : "", "\"k", i, "\"");
  }
  vocab.push_back("");
  const TokenMasker masker(vocab, {static_cast<int32_t>(vocab.size()) - 1});
  // x in two places, neither a tail call: after "a" and after "b" the states differ.
  auto compiled = CompileGbnf("root ::= \"a\" x \"!\" | \"b\" x \"?\"\n" + x);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const auto g = *compiled;
  TokenBitmask mask;
  Matcher probe(g);
  ASSERT_TRUE(probe.Advance("a"));
  MaskCache alone;
  ASSERT_TRUE(masker.FillMask(probe, &mask, &alone).ok());
  const int64_t one = alone.steps();
  ASSERT_GT(one, 300);

  const MatcherLimits limits{.max_steps_per_mask = one + one / 2};
  Matcher a(g, limits), b(g, limits);
  ASSERT_TRUE(a.Advance("a"));
  ASSERT_TRUE(b.Advance("b"));
  MaskCache shared;
  shared.set_epoch(7);
  EXPECT_TRUE(masker.FillMask(a, &mask, &shared).ok());
  const absl::Status second = masker.FillMask(b, &mask, &shared);
  EXPECT_EQ(second.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(second.message(), HasSubstr(absl::StrCat("max_steps_per_mask (", one + one / 2)));
  shared.set_epoch(8);  // the next engine step: a new budget
  EXPECT_TRUE(masker.FillMask(b, &mask, &shared).ok());
  EXPECT_TRUE(MaskAllows(mask, 4));  // "k0"
}

}  // namespace
}  // namespace pagoda::grammar
