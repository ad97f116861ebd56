// pagoda-grammar-bench: what constrained decoding costs on a real vocabulary. Prints the
// compile time of each schema, the token trie's build time, and the token mask's time per
// decode step at 1 and N streams (one thread) for a nested schema, along random
// constrained generations (a uniformly random allowed token each step: no model).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using pagoda::grammar::Matcher;
using pagoda::grammar::TokenBitmask;
using pagoda::grammar::TokenMasker;

constexpr char kNested[] = R"({
  "$defs": {
    "address": {"type": "object", "properties": {
      "street": {"type": "string", "maxLength": 40}, "city": {"type": "string"},
      "zip": {"type": "string", "minLength": 5, "maxLength": 5},
      "country": {"enum": ["US", "DE", "FR", "JP", "CN"]}},
      "required": ["street", "city", "country"], "additionalProperties": false},
    "item": {"type": "object", "properties": {
      "sku": {"type": "string", "maxLength": 12}, "qty": {"type": "integer"},
      "price": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"},
      "maxItems": 4}, "gift": {"type": "boolean"}},
      "required": ["sku", "qty", "price"], "additionalProperties": false}},
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "customer": {"type": "object", "properties": {
      "name": {"type": "string"}, "email": {"type": "string"},
      "address": {"$ref": "#/$defs/address"},
      "vip": {"anyOf": [{"type": "boolean"}, {"type": "null"}]}},
      "required": ["name", "address"]},
    "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1,
              "maxItems": 8},
    "status": {"enum": ["new", "paid", "shipped"]},
    "note": {"type": "string", "maxLength": 200}},
  "required": ["id", "customer", "items", "status"],
  "additionalProperties": false})";

constexpr char kFlat[] = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer"}, "ok": {"type": "boolean"}},
  "required": ["name", "age", "ok"]})";

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

// One stream: a matcher and its random source.
struct Stream {
  Matcher matcher;
  std::mt19937_64 rng;
  int steps = 0;
  bool done = false;
};

// Picks a random allowed token (steering to the end after `free_steps`: EOS, else a closing
// byte) and advances; marks the stream done at EOS.
void StepStream(Stream* s, const TokenBitmask& mask, const std::vector<std::string>& bytes,
                const std::vector<int32_t>& eos, int free_steps) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < static_cast<int32_t>(bytes.size()); ++id) {
    if (pagoda::grammar::MaskAllows(mask, id)) ids.push_back(id);
  }
  int32_t pick = -1;
  if (s->steps >= free_steps) {
    for (int32_t e : eos) {
      if (pagoda::grammar::MaskAllows(mask, e)) pick = e;
    }
    for (char c : std::string("\"}]:,0n")) {
      if (pick >= 0) break;
      for (int32_t id : ids) {
        if (bytes[id].size() == 1 && bytes[id][0] == c) {
          pick = id;
          break;
        }
      }
    }
  }
  if (pick < 0 && !ids.empty()) {
    pick = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(s->rng)];
  }
  ++s->steps;
  if (pick < 0 || std::find(eos.begin(), eos.end(), pick) != eos.end()) {
    s->done = true;
    return;
  }
  s->matcher.Advance(bytes[pick]);
  s->matcher.Compact();
}

// What the matcher's limits cost on this vocabulary: the first mask of grammars made to
// spend expansion steps (thousands of heads that every token's first byte must step), until
// MatcherLimits::max_steps_per_mask stops them; steps per millisecond, and so the worst one
// mask (and one request in one engine step) can take.
void Budgets(const TokenMasker& masker) {
  struct Case {
    const char* name;
    std::string gbnf;
  };
  std::vector<Case> cases;
  for (const int n : {100, 1000, 2000}) {
    std::string text = "root ::= ";
    for (int i = 0; i < n; ++i) {
      text += (i ? " | " : "") + std::string("x") + std::to_string(i) + " [a-z]*";
    }
    for (int i = 0; i < n; ++i) text += "\nx" + std::to_string(i) + " ::= [ -~]";
    cases.push_back({n == 100    ? "100 alternatives"
                     : n == 1000 ? "1000 alternatives"
                                 : "2000 alternatives",
                     text});
  }
  for (const Case& c : cases) {
    auto g = pagoda::grammar::CompileGbnf(c.gbnf);
    if (!g.ok()) {
      std::printf("budget %s: %s\n", c.name, std::string(g.status().message()).c_str());
      continue;
    }
    const Matcher m(*g);
    pagoda::grammar::MaskCache cache(8, 1024);
    TokenBitmask mask;
    const auto t = Clock::now();
    const absl::Status s = masker.FillMask(m, &mask, &cache);
    const double ms = Ms(Clock::now() - t);
    std::printf("budget %-18s first mask: %9lld steps %8.1f ms  %7.0f steps/ms  %s\n", c.name,
                static_cast<long long>(cache.steps()), ms, cache.steps() / std::max(ms, 1e-3),
                s.ok() ? "ok" : std::string(s.message()).substr(0, 60).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pagoda-grammar-bench: compile time and token-mask time per step"};
  std::string vocab_path;
  int streams = 16;
  int free_steps = 100;
  int generations = 4;
  app.add_option("--vocab", vocab_path,
                 "GGUF holding the tokenizer (e.g. "
                 "build/testdata/vocab/ggml-vocab-llama-bpe.gguf)")
      ->required();
  app.add_option("--streams", streams, "streams masked per step in the multi-stream run")
      ->check(CLI::Range(1, 256));
  app.add_option("--free-steps", free_steps, "random steps before steering to the end");
  app.add_option("--generations", generations, "single-stream generations to time");
  CLI11_PARSE(app, argc, argv);

  auto file = pagoda::gguf::GgufFile::Open(vocab_path);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", std::string(file.status().message()).c_str());
    return 1;
  }
  auto tok = pagoda::model::Tokenizer::FromGguf(**file);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> bytes((*tok)->vocab_size());
  for (int32_t id = 0; id < (*tok)->vocab_size(); ++id) bytes[id] = (*tok)->TokenBytes(id);
  const std::vector<int32_t> eos = (*tok)->eog_ids();
  std::printf("vocabulary: %zu tokens\n", bytes.size());

  for (const auto& [name, text] : {std::pair{"nested", kNested}, std::pair{"flat", kFlat}}) {
    const int reps = 50;
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) {
      auto g = pagoda::grammar::CompileJsonSchema(text);
      if (!g.ok()) {
        std::fprintf(stderr, "%s\n", std::string(g.status().message()).c_str());
        return 1;
      }
    }
    std::printf("compile %-7s %.3f ms\n", name, Ms(Clock::now() - t0) / reps);
  }
  const auto t0 = Clock::now();
  TokenMasker masker(bytes, eos);
  std::printf("token trie build: %.1f ms\n", Ms(Clock::now() - t0));

  const auto grammar = *pagoda::grammar::CompileJsonSchema(kNested);
  TokenBitmask mask;
  int64_t max_mask_steps = 0;
  for (const bool cached : {false, true}) {
    pagoda::grammar::MaskCache cache;
    std::vector<double> one;
    for (int g = 0; g < generations; ++g) {
      Stream s{Matcher(grammar), std::mt19937_64(g + 1)};
      while (!s.done && s.steps < free_steps + 2000) {
        const auto t = Clock::now();
        if (cached) {
          const int64_t before = cache.steps();
          (void)masker.FillMask(s.matcher, &mask, &cache);
          max_mask_steps = std::max(max_mask_steps, cache.steps() - before);
        } else {
          (void)masker.FillMask(&s.matcher, &mask);
        }
        one.push_back(Ms(Clock::now() - t));
        StepStream(&s, mask, bytes, eos, free_steps);
      }
    }
    double sum = 0;
    for (double v : one) sum += v;
    std::printf(
        "1 stream, nested schema, %s: %zu steps: mean %.3f ms  p50 %.3f  p90 %.3f  "
        "p99 %.3f  max %.3f ms\n",
        cached ? "mask cache" : "no cache", one.size(), sum / one.size(), Percentile(one, 0.5),
        Percentile(one, 0.9), Percentile(one, 0.99), Percentile(one, 1.0));
  }

  std::printf("nested schema: at most %lld expansion steps in one cached mask\n",
              static_cast<long long>(max_mask_steps));
  Budgets(masker);

  // N streams in lockstep (a finished stream restarts), one cache shared (same grammar).
  // Each stream has its own cache sized as the engine's (Engine::Core::MaskLogits).
  std::vector<pagoda::grammar::MaskCache> caches;
  for (int i = 0; i < streams; ++i) caches.emplace_back(8, 1024);
  std::vector<Stream> batch;
  for (int i = 0; i < streams; ++i) {
    batch.push_back(Stream{Matcher(grammar), std::mt19937_64(100 + i)});
  }
  std::vector<double> per_step;
  for (int step = 0; step < free_steps; ++step) {
    double ms = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      Stream& s = batch[i];
      if (s.done) s = Stream{Matcher(grammar), std::mt19937_64(1000 + step)};
      const auto t = Clock::now();
      (void)masker.FillMask(s.matcher, &mask, &caches[i]);
      ms += Ms(Clock::now() - t);
      StepStream(&s, mask, bytes, eos, free_steps);
    }
    per_step.push_back(ms);
  }
  double sum = 0;
  for (double v : per_step) sum += v;
  size_t hits = 0;
  for (const auto& c : caches) hits += c.hits();
  std::printf(
      "%d streams (one thread, a mask cache each), nested schema: %zu steps: mean %.3f "
      "ms/step  p50 %.3f  p99 %.3f  max %.3f ms; cache hits %zu\n",
      streams, per_step.size(), sum / per_step.size(), Percentile(per_step, 0.5),
      Percentile(per_step, 0.99), Percentile(per_step, 1.0), hits);
  return 0;
}
