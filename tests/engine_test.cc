// The engine with stories260K: many requests at once, preemption, seeded sampling, stop
// strings, aborts, validation and admission control, with the pool full again after each.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "tests/engine_test_util.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using engine::CollectedOutput;
using engine::FinishReason;
using engine::GenerationRequest;
using testing::GreedyRequest;

std::vector<std::string> ThirtyTwoPrompts() {
  const std::vector<std::string> subjects = {"Once upon a time", "The little dog", "Lily saw",
                                             "Tom and Sue",      "One day",        "The sun was",
                                             "A big red ball",   "Mom said"};
  const std::vector<std::string> tails = {"", " in the park", " and", ", there was"};
  std::vector<std::string> prompts;
  for (const auto& t : tails) {
    for (const auto& s : subjects) prompts.push_back(s + t);
  }
  return prompts;
}

// Runs 32 prompts alone on an engine of `alone_config`, then all at once on one of
// `batch_config`, expects equal outputs and the pool (and swap space) full again; returns the
// batch engine's stats.
engine::EngineStats ExpectBatchEqualsAlone(engine::EngineConfig batch_config,
                                           bool expect_preemption,
                                           engine::EngineConfig alone_config = {}) {
  auto alone_engine = testing::StoriesEngine(alone_config);
  auto batch_engine = testing::StoriesEngine(batch_config);
  if (alone_engine == nullptr || batch_engine == nullptr) {
    ADD_FAILURE() << "no engine";
    return {};
  }
  const model::Tokenizer& tok = alone_engine->tokenizer();
  std::vector<GenerationRequest> requests;
  std::vector<CollectedOutput> alone;
  for (const std::string& p : ThirtyTwoPrompts()) {
    const int32_t n = 24 + static_cast<int32_t>(requests.size() % 5) * 8;
    requests.push_back(GreedyRequest(tok.Encode(p, true), n));
    alone.push_back(testing::RunOne(*alone_engine, requests.back()));
  }
  EXPECT_EQ(requests.size(), 32u);
  const std::vector<CollectedOutput> together = testing::RunAll(*batch_engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(together[i].token_ids, alone[i].token_ids) << "request " << i;
    EXPECT_EQ(together[i].text, alone[i].text) << "request " << i;
    EXPECT_EQ(together[i].token_ids.size(), static_cast<size_t>(*requests[i].max_tokens));
    EXPECT_EQ(together[i].usage.completion_tokens, *requests[i].max_tokens);
  }
  EXPECT_TRUE(testing::WaitForIdle(*batch_engine));
  const engine::EngineStats stats = batch_engine->Stats();
  if (expect_preemption) {
    EXPECT_GT(stats.num_preemptions, 0);
  }
  EXPECT_EQ(stats.num_free_blocks, stats.num_blocks);
  EXPECT_EQ(stats.num_free_swap_blocks, stats.num_swap_blocks);
  EXPECT_EQ(stats.num_swapped, 0);
  return stats;
}

TEST(EngineTest, ThirtyTwoPromptsTogetherEqualEachAlone) { ExpectBatchEqualsAlone({}, false); }

TEST(EngineTest, ThirtyTwoPromptsWithPreemptionEqualEachAlone) {
  // 40 blocks of 4 tokens cannot hold 32 sequences of up to ~70 tokens: preemption.
  const engine::EngineStats s = ExpectBatchEqualsAlone(
      {.block_size = 4, .num_blocks = 40, .preemption_mode = engine::PreemptionMode::kRecompute},
      true);
  EXPECT_EQ(s.num_swap_blocks, 0);
  EXPECT_EQ(s.num_swap_outs, 0);
}

// An f32 cache unless told: the sizes below count 4-byte elements.
engine::EngineConfig SwapConfig(int64_t swap_space, const std::string& kv_dtype = "f32") {
  return {.block_size = 4,
          .num_blocks = 40,
          .kv_cache_dtype = kv_dtype,
          .preemption_mode = engine::PreemptionMode::kSwap,
          .swap_space = swap_space};
}

TEST(EngineTest, ThirtyTwoPromptsWithSwapPreemptionEqualEachAlone) {
  // A stories260K block of 4 tokens is 5 layers x K,V x 4 x 32 floats = 5,120 bytes: 400 fit.
  const engine::EngineStats s = ExpectBatchEqualsAlone(SwapConfig(400 * 5120), true);
  EXPECT_EQ(s.num_swap_blocks, 400);
  EXPECT_GT(s.num_swap_outs, 0);
  EXPECT_EQ(s.num_swap_ins, s.num_swap_outs);
  EXPECT_EQ(s.num_preemptions, s.num_swap_outs);  // room for every victim
}

TEST(EngineTest, ASmallSwapSpaceSwapsSomeVictimsAndRecomputesTheRest) {
  // 4 blocks: a victim holding more computed blocks than are free recomputes.
  const engine::EngineStats s = ExpectBatchEqualsAlone(SwapConfig(4 * 5120), true);
  EXPECT_EQ(s.num_swap_blocks, 4);
  EXPECT_GT(s.num_swap_outs, 0);
  EXPECT_GT(s.num_preemptions, s.num_swap_outs);
}

// A swap copies an int8 block's parameters with its codes: a preempted sequence goes on
// exactly as if it had run alone.
TEST(EngineTest, Int8CacheWithSwapPreemptionEqualsEachAlone) {
  const engine::EngineStats s = ExpectBatchEqualsAlone(SwapConfig(int64_t{1} << 20, "int8"), true,
                                                       {.block_size = 4, .kv_cache_dtype = "int8"});
  EXPECT_GT(s.num_swap_outs, 0);
  EXPECT_EQ(s.num_preemptions, s.num_swap_outs);
}

TEST(EngineTest, AutoPreemptionSwapsOnTheCpuIntoASpaceAsLargeAsTheCache) {
  auto automatic =
      testing::StoriesEngine({.num_blocks = 64, .preemption_mode = engine::PreemptionMode::kAuto});
  auto sized = testing::StoriesEngine({.num_blocks = 64,
                                       .kv_cache_dtype = "f16",
                                       .preemption_mode = engine::PreemptionMode::kAuto,
                                       .swap_space = 10 * 10240});  // 16-token f16 blocks: 10,240 B
  ASSERT_NE(automatic, nullptr);
  ASSERT_NE(sized, nullptr);
  EXPECT_EQ(automatic->Stats().num_swap_blocks, 64);
  EXPECT_EQ(sized->Stats().num_swap_blocks, 10);
  // kAuto is the default (the product's: `pagoda serve` with no flags); recompute has none.
  EXPECT_EQ(testing::StoriesEngine({.num_blocks = 64})->Stats().num_swap_blocks, 64);
  EXPECT_EQ(testing::StoriesEngine(
                {.num_blocks = 64, .preemption_mode = engine::PreemptionMode::kRecompute})
                ->Stats()
                .num_swap_blocks,
            0);
}

TEST(EngineTest, ASwapSpaceTooSmallForOneBlockIsAnError) {
  auto backend = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 1});
  ASSERT_TRUE(backend.ok());
  auto file = gguf::GgufFile::Open(testing::ModelPath("stories260K.gguf"));
  ASSERT_TRUE(file.ok());
  auto engine = engine::Engine::Create(SwapConfig(5119), *std::move(file), *std::move(backend));
  EXPECT_EQ(engine.status().message(),
            "engine: swap space of 5119 bytes holds no KV block (5120 bytes each); give a "
            "larger --swap-space");
}

TEST(EngineTest, SeededSamplingIsTheSameAloneAndInABatchOf16) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  auto make = [&](const std::string& prompt, uint64_t seed) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = 48;
    r.ignore_eos = true;
    r.sampling.temperature = 0.9f;
    r.sampling.top_k = 40;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = seed;
    return r;
  };
  const CollectedOutput alone = testing::RunOne(*engine, make("Once upon a time", 1234));
  std::vector<GenerationRequest> batch;
  for (int i = 0; i < 15; ++i) batch.push_back(make(ThirtyTwoPrompts()[i + 1], 100 + i));
  batch.insert(batch.begin() + 7, make("Once upon a time", 1234));
  const std::vector<CollectedOutput> outs = testing::RunAll(*engine, batch);
  EXPECT_EQ(outs[7].token_ids, alone.token_ids);
  EXPECT_EQ(outs[7].text, alone.text);
  // A different seed samples differently (not a constant sampler).
  const CollectedOutput other = testing::RunOne(*engine, make("Once upon a time", 99));
  EXPECT_NE(other.token_ids, alone.token_ids);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EngineTest, StopStringSpanningSeveralTokensNeverLeaks) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  // Greedy text: ", there was a little girl named Lily. She loved to play outside ..."
  GenerationRequest r =
      GreedyRequest(engine->tokenizer().Encode("Once upon a time", true), 64, false);
  r.stop = {"girl named"};
  std::vector<std::string> deltas;
  auto sink = std::make_shared<engine::CollectingSink>(
      [&](const engine::GenerationOutput& o) { deltas.push_back(o.text); });
  ASSERT_TRUE(engine->Submit(r, sink).ok());
  const CollectedOutput out = sink->Wait();
  EXPECT_EQ(out.text, ", there was a little ");
  EXPECT_EQ(out.finish_reason, FinishReason::kStop);
  std::string joined;
  for (const auto& d : deltas) {
    EXPECT_EQ(d.find("girl"), std::string::npos) << "leaked delta: " << d;
    joined += d;
  }
  EXPECT_EQ(joined, out.text);
  // "girl named" spans several tokens: the tokens up to its end were generated.
  EXPECT_GE(out.token_ids.size(), 6u);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EngineTest, StopTokenAndEos) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  GenerationRequest r = GreedyRequest({1, 403, 407, 261, 378}, 64, false);
  r.stop_token_ids = {376};  // "little", the 5th greedy token
  const CollectedOutput out = testing::RunOne(*engine, r);
  EXPECT_EQ(out.token_ids, (std::vector<int32_t>{432, 383, 286, 261, 376}));
  EXPECT_EQ(out.finish_reason, FinishReason::kStop);
}

// Every end-of-generation token stops (here an end-of-turn token that is not EOS: "little",
// the 5th greedy token, named by tokenizer.ggml.eot_token_id); ignore_eos runs past it.
TEST(EngineTest, EndOfGenerationTokenOtherThanEosStops) {
  auto engine = testing::StoriesEngineWithKeys({{"tokenizer.ggml.eot_token_id", 376}});
  ASSERT_NE(engine, nullptr);
  const model::Tokenizer& tok = engine->tokenizer();
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.eog_ids(), (std::vector<int32_t>{2, 376}));
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const CollectedOutput stopped = testing::RunOne(*engine, GreedyRequest(prompt, 64, false));
  EXPECT_EQ(stopped.token_ids, (std::vector<int32_t>{432, 383, 286, 261, 376}));
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, tok.Decode(stopped.token_ids, false));

  const CollectedOutput past = testing::RunOne(*engine, GreedyRequest(prompt, 12, true));
  ASSERT_EQ(past.token_ids.size(), 12u);
  EXPECT_EQ(std::vector<int32_t>(past.token_ids.begin(), past.token_ids.begin() + 5),
            stopped.token_ids);
  EXPECT_EQ(past.finish_reason, FinishReason::kLength);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EngineTest, AbortWaitingAndRunningFreesBlocks) {
  auto engine = testing::StoriesEngine({.max_seqs = 1});
  ASSERT_NE(engine, nullptr);
  Notification first_token;
  // Paused from the engine thread at a's first token: both aborts land before the next
  // step, so b is still waiting and a still running, however late this thread is.
  auto running = std::make_shared<engine::CollectingSink>([&](const engine::GenerationOutput& o) {
    if (!o.token_ids.empty() && !first_token.HasBeenNotified()) {
      engine->Pause();
      first_token.Notify();
    }
  });
  auto waiting = std::make_shared<engine::CollectingSink>();
  engine->Pause();  // a and b enter the same step: a runs, b waits (max_seqs = 1)
  auto a = engine->Submit(GreedyRequest({1, 403}, 1500), running);
  auto b = engine->Submit(GreedyRequest({1, 407}, 1500), waiting);
  ASSERT_TRUE(a.ok() && b.ok());
  engine->Resume();
  first_token.WaitForNotification();
  engine->Abort(b->handle);
  engine->Abort(a->handle);
  engine->Resume();
  const CollectedOutput wb = waiting->Wait();
  EXPECT_EQ(wb.finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(wb.token_ids.empty());
  const CollectedOutput wa = running->Wait();
  EXPECT_EQ(wa.finish_reason, FinishReason::kAbort);
  EXPECT_LT(wa.token_ids.size(), 1500u);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
  EXPECT_EQ(engine->Stats().num_aborted, 2);
}

TEST(EngineTest, InvalidRequestsNameTheField) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  struct Case {
    std::string field;
    std::function<void(GenerationRequest&)> mutate;
  };
  const std::vector<Case> cases = {
      {"prompt", [](GenerationRequest& r) { r.prompt.clear(); }},
      {"prompt", [](GenerationRequest& r) { r.prompt = "bad \xff utf8"; }},
      {"prompt", [](GenerationRequest& r) { r.prompt = std::string(3000, 'a'); }},
      {"prompt_token_ids",
       [](GenerationRequest& r) {
         r.prompt.clear();
         r.prompt_token_ids = {1, 512};
       }},
      {"prompt_token_ids",
       [](GenerationRequest& r) {
         r.prompt.clear();
         r.prompt_token_ids = {-1};
       }},
      {"max_tokens", [](GenerationRequest& r) { r.max_tokens = 0; }},
      {"max_tokens", [](GenerationRequest& r) { r.max_tokens = -3; }},
      {"max_tokens", [](GenerationRequest& r) { r.max_tokens = 2048; }},
      {"temperature", [](GenerationRequest& r) { r.sampling.temperature = -0.5f; }},
      {"top_p", [](GenerationRequest& r) { r.sampling.top_p = 0; }},
      {"top_p", [](GenerationRequest& r) { r.sampling.top_p = 1.5f; }},
      {"top_k", [](GenerationRequest& r) { r.sampling.top_k = -1; }},
      {"min_p", [](GenerationRequest& r) { r.sampling.min_p = 2; }},
      {"repetition_penalty", [](GenerationRequest& r) { r.sampling.repetition_penalty = 0; }},
      {"logprobs", [](GenerationRequest& r) { r.sampling.logprobs = 21; }},
      {"stop[0]", [](GenerationRequest& r) { r.stop = {""}; }},
      {"stop", [](GenerationRequest& r) { r.stop.assign(17, "x"); }},
      {"stop[1]",
       [](GenerationRequest& r) {
         r.stop = {"x", std::string(257, 'x')};
       }},
      {"stop[0]", [](GenerationRequest& r) { r.stop = {"\xff"}; }},
      {"request_id", [](GenerationRequest& r) { r.request_id = "a\nINFO forged line"; }},
      {"request_id", [](GenerationRequest& r) { r.request_id = std::string(257, 'r'); }},
      {"request_id", [](GenerationRequest& r) { r.request_id = "\xc3"; }},
      {"prompt",
       [](GenerationRequest& r) {
         r.prompt_token_ids = {1, 2};
       }},
      {"logprobs", [](GenerationRequest& r) { r.sampling.logprobs = -1; }},
      {"stop_token_ids", [](GenerationRequest& r) { r.stop_token_ids = {600}; }},
  };
  for (const Case& c : cases) {
    GenerationRequest r;
    r.prompt = "Once upon a time";
    c.mutate(r);
    auto result = engine->Submit(r, std::make_shared<engine::CollectingSink>());
    ASSERT_FALSE(result.ok()) << c.field;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(result.status().message().substr(0, c.field.size() + 1), c.field + ":")
        << result.status();
  }
  // The engine still serves.
  const CollectedOutput ok = testing::RunOne(*engine, GreedyRequest({1, 403, 407, 261, 378}, 5));
  EXPECT_EQ(ok.token_ids, (std::vector<int32_t>{432, 383, 286, 261, 376}));
}

// Regression (hardening): prompts were tokenized whole before the length check, and any
// number of stop strings of any length was accepted (the held-back check per token costs
// their total length).
TEST(EngineTest, RequestLimitsApplyBeforeTokenizing) {
  auto engine = testing::StoriesEngine(
      {.max_prompt_bytes = 100, .max_stop_strings = 2, .max_stop_string_bytes = 8});
  ASSERT_NE(engine, nullptr);
  GenerationRequest r = GreedyRequest({}, 4);
  r.prompt = std::string(101, 'a');
  auto s = engine->Submit(r, std::make_shared<engine::CollectingSink>());
  EXPECT_EQ(s.status().message(),
            "prompt: has 101 bytes; at most 100 are accepted (max_prompt_bytes)");
  r.prompt = "Once upon a time";
  r.stop = {"a", "b", "c"};
  s = engine->Submit(r, std::make_shared<engine::CollectingSink>());
  EXPECT_EQ(s.status().message(), "stop: 3 stop strings; at most 2 (max_stop_strings)");
  r.stop = {"123456789"};
  s = engine->Submit(r, std::make_shared<engine::CollectingSink>());
  EXPECT_EQ(s.status().message(), "stop[0]: has 9 bytes; at most 8 (max_stop_string_bytes)");
  r.stop = {"12345678", "girl"};
  EXPECT_EQ(testing::RunOne(*engine, r).finish_reason, FinishReason::kLength);
  // Chat messages count their bytes plus 16 of framing each, before the template runs:
  // empty messages are not free (issue 23 finding 2: 500,000 of them rendered for 4 s).
  auto chat = testing::StoriesEngine(
      {.max_prompt_bytes = 100,
       .chat_template = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"});
  ASSERT_NE(chat, nullptr);
  GenerationRequest c = GreedyRequest({}, 4);
  c.messages.assign(5, {"user", ""});  // 5 x (4 + 16) = 100
  EXPECT_TRUE(chat->Submit(c, std::make_shared<engine::CollectingSink>()).ok());
  c.messages.assign(6, {"user", ""});
  s = chat->Submit(c, std::make_shared<engine::CollectingSink>());
  EXPECT_EQ(s.status().message(),
            "messages: have 120 bytes; at most 100 are accepted (max_prompt_bytes)");
  c.messages.assign(500000, {"", ""});
  s = chat->Submit(c, std::make_shared<engine::CollectingSink>());
  EXPECT_EQ(s.status().message(),
            "messages: have 8000000 bytes; at most 100 are accepted (max_prompt_bytes)");
  // The default bound is what the context can hold: context x the longest token's bytes.
  auto defaults = testing::StoriesEngine();
  ASSERT_NE(defaults, nullptr);
  r.stop.clear();
  r.prompt = std::string(512 * 64, 'a');
  s = defaults->Submit(r, std::make_shared<engine::CollectingSink>());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("(max_prompt_bytes)"), std::string::npos) << s.status();
}

// The KV cache's type decides how many blocks a memory budget buys (stories260K: 5 layers,
// 4 KV heads of 8, blocks of 16 tokens: f32 20480 bytes a block, f16 10240, int8 7680 with
// its K steps and offsets and V scales), and every type serves; f16, bf16 and int8 keep the
// greedy tokens of f32 here.
TEST(EngineTest, KvCacheDtypeSizesTheCacheAndServes) {
  const GenerationRequest r = GreedyRequest({1, 403, 407, 261, 378}, 24);
  std::vector<int32_t> f32_tokens;
  for (auto [dtype, blocks] : std::vector<std::pair<std::string, int32_t>>{
           {"f32", 51}, {"f16", 102}, {"bf16", 102}, {"int8", 136}}) {
    SCOPED_TRACE(dtype);
    auto engine = testing::StoriesEngine({.kv_cache_memory = 1 << 20, .kv_cache_dtype = dtype});
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->Stats().num_blocks, blocks);
    const CollectedOutput out = testing::RunOne(*engine, r);
    ASSERT_EQ(out.token_ids.size(), 24u);
    if (dtype == "f32") f32_tokens = out.token_ids;
    if (dtype != "f32") {
      EXPECT_EQ(out.token_ids, f32_tokens);
    }
    EXPECT_TRUE(testing::WaitForIdle(*engine));
    EXPECT_EQ(engine->Stats().num_free_blocks, blocks);
  }
}

TEST(EngineTest, UnknownKvCacheDtypeIsAnError) {
  auto file = gguf::GgufFile::Open(testing::ModelPath("stories260K.gguf"));
  ASSERT_TRUE(file.ok());
  auto backend = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 1});
  ASSERT_TRUE(backend.ok());
  auto engine =
      engine::Engine::Create({.kv_cache_dtype = "fp4"}, *std::move(file), *std::move(backend));
  EXPECT_EQ(engine.status().message(),
            "kv_cache_dtype: unknown type 'fp4' (auto, f32, f16, bf16, int8 or fp8)");
}

// fp8 is a CUDA KV type: the CPU backend refuses it by name.
TEST(EngineTest, Fp8KvCacheIsRefusedOnCpu) {
  auto file = gguf::GgufFile::Open(testing::ModelPath("stories260K.gguf"));
  ASSERT_TRUE(file.ok());
  auto backend = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 1});
  ASSERT_TRUE(backend.ok());
  auto engine =
      engine::Engine::Create({.kv_cache_dtype = "fp8"}, *std::move(file), *std::move(backend));
  EXPECT_EQ(engine.status().message(),
            "kv_cache_dtype: the cpu backend cannot keep the KV cache in fp8");
}

TEST(EngineTest, FullQueueIsResourceExhausted) {
  auto engine = testing::StoriesEngine({.max_seqs = 1, .max_queued_requests = 2});
  ASSERT_NE(engine, nullptr);
  std::vector<std::shared_ptr<engine::CollectingSink>> sinks;
  std::vector<engine::RequestHandle> handles;
  int rejected = 0;
  for (int i = 0; i < 8; ++i) {
    sinks.push_back(std::make_shared<engine::CollectingSink>());
    auto s = engine->Submit(GreedyRequest({1, 403}, 1000), sinks.back());
    if (s.ok()) {
      handles.push_back(s->handle);
    } else {
      EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
      ++rejected;
      sinks.pop_back();
    }
  }
  // At most one running plus two queued: at least five of eight are turned away.
  EXPECT_GE(rejected, 5);
  for (auto h : handles) engine->Abort(h);
  for (auto& s : sinks) EXPECT_EQ(s->Wait().finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

// Issue 14, finding 11: requests the next step admits at once are not queued, so a burst
// that fits in the free run slots plus the queue is accepted whole.
TEST(EngineTest, QueueLimitCountsOnlyRequestsBeyondTheFreeRunSlots) {
  auto engine = testing::StoriesEngine({.max_seqs = 4, .max_queued_requests = 2});
  ASSERT_NE(engine, nullptr);
  engine->Pause();  // the burst arrives before any step: 4 free slots, nothing running
  std::vector<std::shared_ptr<engine::CollectingSink>> sinks;
  std::vector<absl::Status> results;
  for (int i = 0; i < 7; ++i) {
    sinks.push_back(std::make_shared<engine::CollectingSink>());
    results.push_back(engine->Submit(GreedyRequest({1, 403}, 3), sinks.back()).status());
  }
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
  EXPECT_EQ(results[6].code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(results[6].message(),
            "queue full: 2 requests waiting beyond 4 free run slots (max_queued_requests = 2)");
  engine->Resume();
  for (size_t i = 0; i < sinks.size(); ++i) {  // a refused request's sink never hears back
    if (results[i].ok()) {
      EXPECT_EQ(sinks[i]->Wait().finish_reason, FinishReason::kLength);
    }
  }
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EngineTest, KvCacheTooSmallForTheRequestIsRejected) {
  auto engine = testing::StoriesEngine({.block_size = 16, .num_blocks = 2});
  ASSERT_NE(engine, nullptr);
  auto s = engine->Submit(GreedyRequest({1, 403}, 100), std::make_shared<engine::CollectingSink>());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  // Within capacity it runs; with max_tokens unset it stops at the cache's capacity.
  GenerationRequest r = GreedyRequest({1, 403}, 30);
  EXPECT_EQ(testing::RunOne(*engine, r).token_ids.size(), 30u);
  r.max_tokens.reset();
  EXPECT_EQ(testing::RunOne(*engine, r).token_ids.size(), 30u);
}

}  // namespace
}  // namespace pagoda
