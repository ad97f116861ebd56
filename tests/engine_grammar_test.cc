// Constrained decoding through the engine (stories260K, CPU): with a grammar in the
// sampling parameters every sample ends at an end-of-generation token the grammar allowed,
// and its text parses and validates against the schema (tests/json_schema_checker.h),
// greedy or sampled, one sample or several (forked from one prompt).
#include <string>
#include <vector>

#include "engine/request.h"
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

}  // namespace
}  // namespace pagoda::engine
