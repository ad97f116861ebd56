// The token mask is exact on the real vocabularies (Llama 3 byte-level BPE, Qwen2, Llama 2
// SentencePiece with byte fallback): at random states reached by sampling allowed tokens,
// the mask equals feeding every token's bytes to a copy of the matcher. Random constrained
// generations always end in JSON that parses and validates (tests/json_schema_checker.h).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/json_schema_checker.h"
#include "tests/test_util.h"

namespace pagoda::grammar {
namespace {

struct Vocab {
  std::vector<std::string> bytes;  // per token id
  std::vector<int32_t> eos;
  std::unique_ptr<TokenMasker> masker;
  std::map<char, int32_t> single;  // a token spelling exactly one byte, per byte
};

Vocab MakeVocab(std::vector<std::string> bytes, std::vector<int32_t> eos) {
  Vocab v;
  v.bytes = std::move(bytes);
  v.eos = std::move(eos);
  v.masker = std::make_unique<TokenMasker>(v.bytes, v.eos);
  for (int32_t id = static_cast<int32_t>(v.bytes.size()); id-- > 0;) {
    if (v.bytes[id].size() == 1) v.single[v.bytes[id][0]] = id;
  }
  return v;
}

// Loaded once per vocabulary file.
const Vocab& RealVocab(const std::string& name) {
  static auto* cache = new std::map<std::string, Vocab>();
  if (auto it = cache->find(name); it != cache->end()) return it->second;
  auto file =
      gguf::GgufFile::Open(pagoda::testing::ModelsDir() + "/vocab/ggml-vocab-" + name + ".gguf");
  EXPECT_TRUE(file.ok()) << file.status();
  auto tok = model::Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  std::vector<std::string> bytes((*tok)->vocab_size());
  for (int32_t id = 0; id < (*tok)->vocab_size(); ++id) bytes[id] = (*tok)->TokenBytes(id);
  return cache->emplace(name, MakeVocab(std::move(bytes), (*tok)->eog_ids())).first->second;
}

// Every byte as a token, then JSON-shaped pieces that span grammar elements, then EOS.
const Vocab& SyntheticVocab() {
  static const Vocab* vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* piece :
         {"{\"",   "\":",         "\": ",         "\",",      "\", \"",   "\"}",
          "\"]",   "}}",          "]}",           "},",       "}, {",     "[{",
          "[\"",   "\"\n",        ",\n  \"",      "\n}",      "true",     "false",
          "null",  "nu",          "ll",           "tr",       "ue",       "0.",
          "12",    "-1",          "e+",           "E-9",      "\\u00",    "\\n",
          "\\\"",  "\xC3\xA9",    "\xE6\x9D\xB1", "\xF0\x9F", "\x99\x82", "name",
          "age",   "tags",        "value",        "kids",     "points",   "kind",
          "label", "version",     "city",         "note",     "line",     "poly",
          "v1",    "x\":",        "y\":",         " {",       "  ",       "Z\xC3\xBC",
          "rich",  "hello world", "\"\"",         "[]",       "{}",       "1}",
          "0]"}) {
      bytes.push_back(piece);
    }
    bytes.push_back("");  // a control token
    bytes.push_back("");  // EOS
    return new Vocab(MakeVocab(std::move(bytes), {static_cast<int32_t>(bytes.size()) - 1}));
  }();
  return *vocab;
}

struct Schema {
  const char* name;
  const char* text;  // nullptr: json_object
};

const Schema kSchemas[] = {
    {"person", R"({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
        "email": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 8},
                 "maxItems": 3},
        "active": {"type": "boolean"}},
      "required": ["name", "age"], "additionalProperties": false})"},
    {"shapes", R"({"$defs": {"point": {"type": "object", "properties": {
        "x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}},
      "type": "object", "properties": {
        "kind": {"enum": ["line", "poly", 3, null]},
        "points": {"type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 1,
                   "maxItems": 4},
        "label": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
        "version": {"const": "v1"}},
      "required": ["kind", "points", "version"]})"},
    {"tree", R"({"$defs": {"node": {"type": "object", "properties": {
        "value": {"type": "integer"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["value"]}}, "$ref": "#/$defs/node"})"},
    {"unicode", R"({"type": "object", "properties": {
        "city": {"enum": ["Zürich", "東京", "🙂"]},
        "note": {"type": "string", "minLength": 2, "maxLength": 6}},
      "required": ["city", "note"]})"},
    {"mixed_array", R"({"type": "array", "items": {"oneOf": [{"type": "integer"},
        {"type": "boolean"}, {"type": "string", "maxLength": 3}]}, "minItems": 2,
        "maxItems": 5})"},
    {"formats", R"({"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}(\\.[a-z]+)?$"},
        "when": {"type": "string", "format": "date-time"},
        "id": {"type": "string", "format": "uuid"},
        "day": {"type": "string", "format": "date"}},
      "required": ["code", "when", "id"]})"},
    {"json_object", nullptr},
};

std::shared_ptr<const Grammar> GrammarOf(const Schema& s) {
  if (s.text == nullptr) return JsonObjectGrammar();
  auto g = CompileJsonSchema(s.text);
  EXPECT_TRUE(g.ok()) << s.name << ": " << g.status();
  return g.ok() ? *g : JsonObjectGrammar();
}

std::vector<int32_t> Allowed(const TokenBitmask& mask, int32_t vocab_size) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab_size; ++id) {
    if (MaskAllows(mask, id)) ids.push_back(id);
  }
  return ids;
}

// Brute force: each token's bytes fed to the matcher, then the matcher restored.
void ExpectMaskExact(const Vocab& v, Matcher* m, const TokenBitmask& mask,
                     const std::string& where) {
  int mismatches = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(v.bytes.size()); ++id) {
    bool expected;
    if (std::find(v.eos.begin(), v.eos.end(), id) != v.eos.end()) {
      expected = m->CanEnd();
    } else if (v.bytes[id].empty()) {
      expected = false;
    } else {
      const Matcher::Snapshot snap = m->Save();
      expected = m->Advance(v.bytes[id]);
      m->Restore(snap);
    }
    if (expected != MaskAllows(mask, id) && ++mismatches <= 5) {
      ADD_FAILURE() << where << ": token " << id << " '" << v.bytes[id] << "' expected "
                    << expected;
    }
  }
  EXPECT_EQ(mismatches, 0) << where;
}

// Picks the next token: uniformly among the allowed ones for `free_steps` steps, then
// steering to an end (EOS when allowed, else closing bytes first).
int32_t PickToken(const Vocab& v, const TokenBitmask& mask, int step, int free_steps,
                  std::mt19937_64* rng) {
  if (step < free_steps) {
    const std::vector<int32_t> ids = Allowed(mask, v.masker->vocab_size());
    if (ids.empty()) return -1;
    return ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(*rng)];
  }
  for (int32_t eos : v.eos) {
    if (MaskAllows(mask, eos)) return eos;
  }
  for (char c : std::string("\"}]:,0n")) {
    auto it = v.single.find(c);
    if (it != v.single.end() && MaskAllows(mask, it->second)) return it->second;
  }
  for (const auto& [c, id] : v.single) {
    if (MaskAllows(mask, id)) return id;
  }
  return -1;
}

struct Generation {
  std::string text;
  bool ended = false;
};

// A random constrained generation; with `check_every` > 0, the mask is checked by brute
// force at every check_every-th step (at most `max_checks` times).
Generation Generate(const Vocab& v, const Schema& s, uint64_t seed, int free_steps,
                    int check_every = 0, int max_checks = 0) {
  // The uncached reference walk has no transitions to reuse: on a 128k vocabulary a string
  // state costs it ~2M expansion steps, past the engine's per-mask limit (which bounds the
  // cached walk the engine runs).
  Matcher m(GrammarOf(s), MatcherLimits{.max_steps_per_mask = int64_t{1} << 30});
  std::mt19937_64 rng(seed);
  Generation out;
  TokenBitmask mask, uncached;
  MaskCache cache;
  int checks = 0;
  for (int step = 0; step < free_steps + 400; ++step) {
    EXPECT_TRUE(v.masker->FillMask(m, &mask, &cache).ok());
    if (check_every > 0 && step % check_every == 0 && checks < max_checks) {
      ++checks;
      EXPECT_TRUE(v.masker->FillMask(&m, &uncached).ok());
      EXPECT_TRUE(mask == uncached) << s.name << " seed " << seed << " step " << step;
      ExpectMaskExact(
          v, &m, mask,
          std::string(s.name) + " seed " + std::to_string(seed) + " after '" + out.text + "'");
    }
    const int32_t id = PickToken(v, mask, step, free_steps, &rng);
    if (id < 0) break;
    if (std::find(v.eos.begin(), v.eos.end(), id) != v.eos.end()) {
      out.ended = m.CanEnd();
      break;
    }
    EXPECT_TRUE(m.Advance(v.bytes[id])) << "token " << id << " after " << out.text;
    m.Compact();
    out.text += v.bytes[id];
  }
  return out;
}

void ExpectValid(const Schema& s, const Generation& g, uint64_t seed) {
  ASSERT_TRUE(g.ended) << s.name << " seed " << seed << ": did not end: " << g.text;
  const nlohmann::json value = nlohmann::json::parse(g.text, nullptr, false);
  ASSERT_FALSE(value.is_discarded()) << s.name << " seed " << seed << ": " << g.text;
  if (s.text == nullptr) {
    EXPECT_TRUE(value.is_object()) << g.text;
    return;
  }
  const nlohmann::json schema = nlohmann::json::parse(s.text);
  EXPECT_EQ(testing::CheckSchema(value, schema, schema), "") << s.name << ": " << g.text;
}

class RealVocabMaskTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RealVocabMaskTest, MaskEqualsBruteForceAtRandomStates) {
  const Vocab& v = RealVocab(GetParam());
  ASSERT_GT(v.bytes.size(), 30000u);
  for (const Schema& s : kSchemas) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      // 6 checked states per generation, spread over its first 30 tokens.
      const Generation g = Generate(v, s, seed, /*free_steps=*/30, /*check_every=*/5, 6);
      ExpectValid(s, g, seed);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, RealVocabMaskTest,
                         ::testing::Values("llama-bpe", "qwen2", "llama-spm"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(SyntheticVocabMaskTest, MaskEqualsBruteForceAtRandomStates) {
  const Vocab& v = SyntheticVocab();
  for (const Schema& s : kSchemas) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      ExpectValid(s, Generate(v, s, seed, /*free_steps=*/60, /*check_every=*/1, 80), seed);
    }
  }
}

TEST(SyntheticVocabMaskTest, TwoHundredRandomGenerationsPerSchemaValidate) {
  const Vocab& v = SyntheticVocab();
  for (const Schema& s : kSchemas) {
    std::set<std::string> distinct;
    for (uint64_t seed = 100; seed < 300; ++seed) {
      const Generation g = Generate(v, s, seed, /*free_steps=*/static_cast<int>(seed % 80));
      ExpectValid(s, g, seed);
      distinct.insert(g.text);
      if (getenv("GRAMMAR_TEST_PRINT") != nullptr && seed % 50 == 0) {
        std::printf("%s: %s\n", s.name, g.text.c_str());
      }
    }
    EXPECT_GT(distinct.size(), 100u) << s.name;  // the walks are random, not one path
  }
}

}  // namespace
}  // namespace pagoda::grammar
