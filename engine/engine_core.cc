#include "engine/engine_core.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/host_memory.h"
#include "common/status_macros.h"
#include "engine/fair_share_policy.h"
#include "engine/sampler.h"

namespace pagoda::engine {
namespace {

constexpr int64_t kDefaultKvCacheMemory = int64_t{1} << 30;

// The KV element type `name` ("auto", "f32", "f16", "bf16", "int8", "fp8") names on `backend`.
absl::StatusOr<kernels::DType> KvDtypeFor(const std::string& name,
                                          const kernels::Backend& backend) {
  // The KV cache types are named as kernels::DTypeName names them.
  constexpr kernels::DType kKvTypes[] = {kernels::DType::kF32, kernels::DType::kF16,
                                         kernels::DType::kBF16, kernels::DType::kI8,
                                         kernels::DType::kF8E4M3};
  const kernels::DType* found =
      std::find_if(std::begin(kKvTypes), std::end(kKvTypes),
                   [&](kernels::DType t) { return kernels::DTypeName(t) == name; });
  if (name != "auto" && found == std::end(kKvTypes)) {
    return absl::InvalidArgumentError(absl::StrCat("kv_cache_dtype: unknown type '", name,
                                                   "' (auto, f32, f16, bf16, int8 or fp8)"));
  }
  const kernels::DType dtype = name == "auto" ? backend.kv_dtype() : *found;
  if (!backend.SupportsKvDtype(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("kv_cache_dtype: the ", backend.name(),
                                                   " backend cannot keep the KV cache in ", name));
  }
  return dtype;
}

// Host blocks of swap space: --swap-space bytes (refused beyond the host memory available),
// or by default as many blocks as the KV cache has, at most half the available host memory
// (the swap space is page-locked on CUDA: more than the host can give would fail or starve it).
absl::StatusOr<int64_t> SwapBlocks(const EngineConfig& config, const kernels::KvCacheShape& shape) {
  const auto block_bytes = static_cast<int64_t>(shape.bytes_per_block());
  const int64_t available = AvailableHostMemory();
  if (config.swap_space > 0) {
    if (available >= 0 && config.swap_space > available) {
      return absl::InvalidArgumentError(
          absl::StrCat("engine: swap space of ", config.swap_space, " bytes exceeds the ",
                       available, " bytes of host memory available; give a smaller --swap-space"));
    }
    return std::min<int64_t>(config.swap_space / block_bytes, int64_t{1} << 30);
  }
  int64_t blocks = shape.num_blocks;
  if (available >= 0) blocks = std::min(blocks, available / 2 / block_bytes);
  return std::max<int64_t>(blocks, 1);
}

Usage MakeUsage(const Sequence& seq) {
  Usage u;
  u.prompt_tokens = seq.prompt_len;
  u.completion_tokens = seq.num_output();
  u.cached_tokens = std::max(seq.cached_tokens, 0);
  if (seq.first_scheduled_time != absl::InfinitePast()) {
    u.queue_time = seq.first_scheduled_time - seq.arrival_time;
  }
  if (seq.first_token_time != absl::InfinitePast()) {
    u.time_to_first_token = seq.first_token_time - seq.arrival_time;
  }
  return u;
}

std::unique_ptr<SchedulingPolicy> MakePolicy(bool fair_share) {
  if (fair_share) return std::make_unique<FairSharePolicy>();
  return std::make_unique<FcfsPolicy>();
}

// Blocks of the KV cache: --num-blocks, else what its memory holds (without
// --kv-cache-memory, no more than max_seqs full contexts can use).
absl::StatusOr<int32_t> CacheBlocks(const EngineConfig& config, int32_t context_length,
                                    const kernels::KvCacheShape& shape) {
  int64_t blocks = config.num_blocks;
  if (blocks <= 0) {
    const int64_t memory =
        config.kv_cache_memory > 0 ? config.kv_cache_memory : kDefaultKvCacheMemory;
    blocks = memory / static_cast<int64_t>(shape.bytes_per_block());
    const int64_t per_seq = (context_length + config.block_size - 1) / config.block_size;
    if (config.kv_cache_memory <= 0) blocks = std::min(blocks, per_seq * config.max_seqs);
  }
  if (blocks <= 0 || blocks > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("engine: KV cache of ", blocks, " blocks; give --num-blocks or more memory"));
  }
  return static_cast<int32_t>(blocks);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine::Core>> Engine::Core::Create(
    const EngineConfig& config, const gguf::GgufFile& file,
    std::unique_ptr<kernels::Backend> backend) {
  std::unique_ptr<Core> core(new Core());
  core->backend_ = std::move(backend);
  core->observer_ = config.step_observer;
  core->policy_kind_ = config.policy;
  core->fair_share_ = config.policy == PolicyKind::kFairShare;
  ASSIGN_OR_RETURN(core->tokenizer_, model::Tokenizer::FromGguf(file));
  ASSIGN_OR_RETURN(core->model_, model::LlamaModel::Load(file, core->backend_.get()));
  const model::LlamaConfig& mc = core->model_->config();
  if (core->tokenizer_->vocab_size() != mc.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: tokenizer has ", core->tokenizer_->vocab_size(),
                     " tokens but the embedding has ", mc.vocab_size));
  }

  ASSIGN_OR_RETURN(const kernels::DType kv_dtype,
                   KvDtypeFor(config.kv_cache_dtype, *core->backend_));
  if (!(std::isfinite(config.kv_cache_fp8_scale) && config.kv_cache_fp8_scale > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv_cache_fp8_scale: ", config.kv_cache_fp8_scale, " is not a finite number > 0"));
  }
  kernels::KvCacheShape shape{.num_layers = mc.num_layers,
                              .num_blocks = 0,
                              .block_size = config.block_size,
                              .num_kv_heads = mc.num_kv_heads,
                              .head_dim = mc.head_dim,
                              .dtype = kv_dtype,
                              .fp8_scale = config.kv_cache_fp8_scale};
  ASSIGN_OR_RETURN(shape.num_blocks, CacheBlocks(config, mc.context_length, shape));
  // Left uninitialized: attention only reads slots its own sequence has written.
  ASSIGN_OR_RETURN(core->kv_buffer_, core->backend_->Allocate(shape.total_bytes()));
  const kernels::PagedKvCache cache{core->kv_buffer_.data(), shape};
  core->kv_dtype_ = shape.dtype;

  // The prefix cache's salt: the model here, the tenant per request (Add).
  core->cache_salt_ = absl::StrCat(
      mc.architecture, "/", mc.vocab_size, "/", mc.num_layers, "/", mc.dim, "/", mc.num_heads, "/",
      mc.num_kv_heads, "/", mc.head_dim, "/", std::string(kernels::DTypeName(kv_dtype)), "/");
  // Swap space: host blocks of the cache's shape.
  kernels::PagedKvCache swap{nullptr, shape};
  swap.shape.num_blocks = 0;
  // kAuto: swap on CPU, where it was measured faster than recomputing; recompute on CUDA
  // until a GPU measurement says otherwise (docs/BENCH.md, "Preemption").
  const bool swap_mode =
      config.preemption_mode == PreemptionMode::kSwap ||
      (config.preemption_mode == PreemptionMode::kAuto && core->backend_->name() == "cpu");
  if (swap_mode && config.kv_cache) {
    ASSIGN_OR_RETURN(const int64_t host_blocks, SwapBlocks(config, shape));
    if (host_blocks <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("engine: swap space of ", config.swap_space, " bytes holds no KV block (",
                       shape.bytes_per_block(), " bytes each); give a larger --swap-space"));
    }
    swap.shape.num_blocks = static_cast<int32_t>(host_blocks);
    ASSIGN_OR_RETURN(core->swap_buffer_, core->backend_->AllocateHost(swap.shape.total_bytes()));
    swap.data = core->swap_buffer_.data();
  }
  core->kv_ = std::make_unique<KvCacheManager>(shape.num_blocks, config.block_size,
                                               config.enable_prefix_caching && config.kv_cache,
                                               PrefixHasher(), swap.shape.num_blocks);
  SchedulerConfig sc{.max_batched_tokens = config.max_batched_tokens,
                     .max_seqs = config.max_seqs,
                     .kv_cache = config.kv_cache};
  // Recompute mode runs a whole context in one step, so the budget must hold one.
  if (!config.kv_cache) sc.max_batched_tokens = std::max(sc.max_batched_tokens, mc.context_length);
  core->scheduler_ =
      std::make_unique<Scheduler>(sc, core->kv_.get(), MakePolicy(core->fair_share_));
  core->runner_ = std::make_unique<ModelRunner>(core->model_.get(), core->kv_.get(), cache, swap);
  core->runner_->set_injected_fault(config.injected_fault);
  core->kv_->set_injected_fault(config.injected_fault);
  core->limits_override_ = config.prefill_limits_override;
  core->pacer_ = std::make_unique<PrefillPacer>(config.kv_cache ? config.max_decode_slowdown : 0,
                                                config.max_batched_tokens);
  core->processor_ = std::make_unique<OutputProcessor>(core->tokenizer_.get(), mc.context_length);
  {
    // The vocabulary's trie for grammar masks, built once here rather than on the engine
    // thread at a first constrained request.
    std::vector<std::string> bytes(core->tokenizer_->vocab_size());
    for (int32_t id = 0; id < core->tokenizer_->vocab_size(); ++id) {
      bytes[id] = core->tokenizer_->TokenBytes(id);
    }
    core->masker_ =
        std::make_unique<const grammar::TokenMasker>(bytes, core->tokenizer_->eog_ids());
  }
  return core;
}

void Engine::Core::Add(std::unique_ptr<Sequence> seq) {
  Sequence* raw = seq.get();
  // Never from the request body: the tenant is the authenticated caller.
  raw->cache_root =
      kv_->hasher().Root(PrefixSalt(cache_salt_, raw->request.tenant, raw->request.cache_salt));
  requests_[RequestOfSeq(raw->id)] =
      RequestState{.unfinished = 1 + raw->pending_forks, .live = {raw->id}};
  seqs_[raw->id] = std::move(seq);
  scheduler_->Add(raw);
}

void Engine::Core::SetTenants(const std::vector<TenantConfig>& tenants) {
  scheduler_->SetTenants(tenants);
  if (policy_kind_ != PolicyKind::kAuto) return;
  const bool fair_share = !tenants.empty();
  if (fair_share != fair_share_) {
    scheduler_->SetPolicy(MakePolicy(fair_share));
    fair_share_ = fair_share;
  }
}

void Engine::Core::Abort(RequestHandle handle) {
  if (!requests_.contains(handle)) return;
  ++num_aborted_;
  EndRequest(handle, FinishReason::kAbort, absl::OkStatus());
}

void Engine::Core::FailAll(const absl::Status& status) {
  std::vector<RequestHandle> all;
  for (const auto& [handle, request] : requests_) all.push_back(handle);
  for (RequestHandle handle : all) EndRequest(handle, FinishReason::kError, status);
}

void Engine::Core::EndRequest(RequestHandle handle, FinishReason reason,
                              const absl::Status& error) {
  const auto it = requests_.find(handle);
  if (it == requests_.end()) return;
  const std::vector<SeqId> live = it->second.live;  // Finish edits it
  for (SeqId id : live) {
    GenerationOutput out;
    out.finish_reason = reason;
    out.error = error;
    Finish(seqs_.at(id).get(), std::move(out));
  }
}

void Engine::Core::Finish(Sequence* seq, GenerationOutput final_output) {
  scheduler_->Remove(seq);
  const RequestHandle handle = RequestOfSeq(seq->id);
  RequestState& request = requests_.at(handle);
  request.unfinished -= 1 + seq->pending_forks;  // forks not made yet end with their parent
  std::erase(request.live, seq->id);
  const Usage u = MakeUsage(*seq);
  request.usage.completion_tokens += u.completion_tokens;
  if (seq->sample_index == 0) {
    request.usage.prompt_tokens = u.prompt_tokens;
    request.usage.cached_tokens = u.cached_tokens;
    request.usage.queue_time = u.queue_time;
    request.usage.time_to_first_token = u.time_to_first_token;
  }
  final_output.index = seq->sample_index;
  final_output.samples_left = request.unfinished;
  if (request.unfinished == 0) {
    final_output.usage = request.usage;
    requests_.erase(handle);
  }
  std::shared_ptr<OutputSink> sink = std::move(seq->sink);
  seqs_.erase(seq->id);  // destroys seq
  if (sink) sink->OnOutput(std::move(final_output));
}

void Engine::Core::EndUnsatisfiable() {
  std::vector<std::pair<RequestHandle, absl::Status>> ended;
  for (auto& [seq, status] : scheduler_->Unsatisfiable()) {
    ended.emplace_back(RequestOfSeq(seq->id), std::move(status));
  }
  for (const auto& [handle, status] : ended) EndRequest(handle, FinishReason::kError, status);
}

void Engine::Core::Step() {
  const bool timed = observer_ != nullptr || pacer_->enabled();
  const absl::Time start = timed ? absl::Now() : absl::InfinitePast();
  EndUnsatisfiable();
  scheduler_->SetPrefillLimits(limits_override_ ? limits_override_() : pacer_->Limits());
  const SchedulerOutput out = scheduler_->Schedule();
  // A step of copies alone (a victim swapped out while the rest was held back) still runs:
  // else the victim would swap back in from host blocks that were never written.
  if (out.empty()) return;
  const absl::Time now = absl::Now();
  for (const ScheduledChunk& c : out.chunks) {
    if (c.seq->first_scheduled_time == absl::InfinitePast()) c.seq->first_scheduled_time = now;
  }
  const absl::Status status = runner_->Execute(out, &logits_);
  ++num_steps_;
  last_step_time_ = absl::Now();
  StepTiming timing;
  if (observer_ != nullptr) {
    timing.num_seqs = static_cast<int32_t>(out.chunks.size());
    timing.num_tokens = out.num_tokens;
    timing.schedule = now - start;
    timing.execute = last_step_time_ - now;
  }
  if (!status.ok()) {
    // A failed step poisons nothing but its own batch: end those requests with the error.
    // Victims swapped out this step lost their K/V with a failed copy: they end too.
    std::vector<RequestHandle> failed;
    for (const ScheduledChunk& c : out.chunks) failed.push_back(RequestOfSeq(c.seq->id));
    for (const Sequence* victim : out.preempted) {
      if (victim->swapped) failed.push_back(RequestOfSeq(victim->id));
    }
    for (RequestHandle handle : failed) EndRequest(handle, FinishReason::kError, status);
  } else {
    ProcessOutputs(out, logits_, observer_ != nullptr ? &timing : nullptr);
  }
  if (!timed) return;
  timing.total = absl::Now() - start;
  if (status.ok()) pacer_->OnStep(out.paced, timing.total);
  if (observer_ != nullptr) observer_->OnStep(timing);
}

void Engine::Core::ProcessOutputs(const SchedulerOutput& out, std::vector<float>& logits,
                                  StepTiming* timing) {
  // Which chunks sample must be decided before the computed counts advance.
  std::vector<bool> samples(out.chunks.size());
  std::vector<std::pair<int32_t, int32_t>> prompt_rows(out.chunks.size());
  for (size_t i = 0; i < out.chunks.size(); ++i) {
    samples[i] = ModelRunner::Samples(out.chunks[i]);
    prompt_rows[i] = ModelRunner::PromptLogprobRows(out.chunks[i]);
  }
  scheduler_->OnStepDone(out);
  const int32_t vocab = model_->config().vocab_size;
  size_t row = 0;
  const absl::Time now = absl::Now();
  for (size_t i = 0; i < out.chunks.size(); ++i) {
    Sequence* seq = out.chunks[i].seq;
    const auto [lp_begin, lp_end] = prompt_rows[i];
    if (lp_begin < lp_end) {
      seq->prompt_logprobs.resize(seq->prompt_logprobs_end());
      for (int32_t p = lp_begin; p < lp_end; ++p, ++row) {
        seq->prompt_logprobs[p] =
            LogprobOf(absl::MakeConstSpan(logits.data() + row * vocab, vocab), seq->tokens[p + 1],
                      *seq->request.sampling.prompt_logprobs);
      }
      if (lp_begin <= seq->prompt_logprobs_next) seq->prompt_logprobs_next = lp_end;
    }
    if (!samples[i]) continue;
    absl::Span<float> row_logits(logits.data() + row * vocab, vocab);
    ++row;
    // The prompt is computed once: the other samples fork from it now.
    if (seq->pending_forks > 0) Fork(seq, row_logits, now, timing);
    SampleOrFail(seq, row_logits, now, timing);
  }
  absl::flat_hash_map<RequestHandle, absl::Status> failed;
  failed.swap(failed_requests_);
  for (const auto& [handle, error] : failed) EndRequest(handle, FinishReason::kError, error);
}

void Engine::Core::SampleOrFail(Sequence* seq, absl::Span<float> logits, absl::Time now,
                                StepTiming* timing) {
  // Whatever one request's sampling throws (a grammar's allocation, a tokenizer's) ends that
  // request, never the engine thread: the other requests go on.
  const SeqId id = seq->id;  // `seq` may be gone when it throws
  // A sample of a request that failed this step (its grammar over a limit, say) is not
  // sampled again: the failure would only be paid for once more.
  if (const auto failed = failed_requests_.find(RequestOfSeq(id));
      failed != failed_requests_.end()) {
    const absl::Status error = failed->second;
    return FailSample(id, error);
  }
  try {
    SampleAndDeliver(seq, logits, now, timing);
  } catch (const std::bad_alloc&) {
    FailSample(id, absl::ResourceExhaustedError("out of memory while sampling this request"));
  } catch (const std::exception& e) {
    FailSample(id, absl::InternalError(absl::StrCat("sampling failed: ", e.what())));
  }
}

void Engine::Core::FailSample(SeqId id, const absl::Status& error) {
  failed_requests_.emplace(RequestOfSeq(id), error);  // the first error stays
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;  // finished before it threw
  GenerationOutput out;
  out.finish_reason = FinishReason::kError;
  out.error = error;
  Finish(it->second.get(), std::move(out));
}

void Engine::Core::SampleAndDeliver(Sequence* seq, absl::Span<float> logits, absl::Time now,
                                    StepTiming* timing) {
  if (seq->num_tokens() >= seq->max_total_tokens) {  // max_tokens 0: the prompt only
    GenerationOutput done;
    done.finish_reason = FinishReason::kLength;
    AttachPrompt(seq, &done);
    Finish(seq, std::move(done));
    return;
  }
  const grammar::TokenBitmask* allowed = nullptr;
  const int64_t grammar_steps = seq->grammar.steps();
  if (const int32_t forced = seq->reasoning.Forced(); forced >= 0) {
    // The reasoning budget is spent: the close marker, a token a step.
    forced_mask_.assign((static_cast<size_t>(tokenizer_->vocab_size()) + 63) / 64, 0);
    forced_mask_[static_cast<size_t>(forced) >> 6] |= uint64_t{1} << (forced & 63);
    allowed = &forced_mask_;
  } else if (seq->grammar.matcher != nullptr && !seq->reasoning.grammar_waits()) {
    const absl::Status s = NextMask(*masker_, num_steps_, &seq->grammar, &grammar_mask_);
    grammar_steps_[seq->request.tenant] += seq->grammar.steps() - grammar_steps;
    if (!s.ok()) return FailSample(seq->id, s);
    if (std::none_of(grammar_mask_.begin(), grammar_mask_.end(), [](uint64_t w) { return w; })) {
      // A whole sentence, and no end-of-generation token to end it with: it stops here.
      GenerationOutput done;
      done.finish_reason = FinishReason::kStop;
      AttachPrompt(seq, &done);
      return Finish(seq, std::move(done));
    }
    allowed = &grammar_mask_;
  }
  SampleInput in{.params = &seq->request.sampling,
                 .seed = seq->seed,
                 .output_index = seq->num_output(),
                 .context = seq->tokens,
                 .output_counts = &seq->output_counts,
                 .allowed = allowed};
  const absl::Time t0 = timing != nullptr ? absl::Now() : now;
  SampleResult r = Sample(in, logits);
  if (allowed == &grammar_mask_) {
    const int64_t before = seq->grammar.steps();
    const absl::Status s = AcceptToken(&seq->grammar, tokenizer_->TokenBytes(r.token_id));
    grammar_steps_[seq->request.tenant] += seq->grammar.steps() - before;
    if (!s.ok()) return FailSample(seq->id, s);
  }
  const absl::Time t1 = timing != nullptr ? absl::Now() : now;
  if (seq->first_token_time == absl::InfinitePast()) seq->first_token_time = now;
  const bool first = seq->num_output() == 0;
  GenerationOutput delivery = processor_->Append(seq, r.token_id, std::move(r.logprob));
  if (seq->reasoning.phase() != ReasoningState::Phase::kOff) {
    seq->reasoning.Observe(tokenizer_->TokenBytes(r.token_id));
  }
  if (first) {
    AttachPrompt(seq, &delivery);
    delivery.reasoning_open = seq->reasoning.open_at_start();
  }
  if (timing != nullptr) {
    timing->sample += t1 - t0;
    timing->detokenize += absl::Now() - t1;
  }
  if (delivery.sample_finished()) {
    Finish(seq, std::move(delivery));
  } else {
    delivery.index = seq->sample_index;
    seq->sink->OnOutput(std::move(delivery));
  }
}

void Engine::Core::AttachPrompt(Sequence* seq, GenerationOutput* out) {
  if (!seq->request.sampling.prompt_logprobs.has_value()) return;
  out->prompt_token_ids.assign(seq->tokens.begin(), seq->tokens.begin() + seq->prompt_len);
  out->prompt_logprobs = std::move(seq->prompt_logprobs);  // all done: never written again
  seq->prompt_logprobs.clear();
}

void Engine::Core::Fork(Sequence* parent, absl::Span<const float> logits, absl::Time now,
                        StepTiming* timing) {
  const RequestHandle handle = RequestOfSeq(parent->id);
  fork_row_.assign(logits.begin(), logits.end());
  const int32_t forks = parent->pending_forks;
  parent->pending_forks = 0;
  for (int32_t i = 1; i <= forks; ++i) {
    auto child = std::make_unique<Sequence>();
    child->id = SampleSeqId(handle, i);
    child->request = parent->request;
    child->sink = parent->sink;
    child->tokens = parent->tokens;
    child->prompt_len = parent->prompt_len;
    child->max_total_tokens = parent->max_total_tokens;
    child->seed = parent->seed + static_cast<uint64_t>(i);  // sample i: seed + i
    child->cache_root = parent->cache_root;
    child->block_hashes = parent->block_hashes;
    child->cached_tokens = parent->cached_tokens;
    child->prompt_logprobs = parent->prompt_logprobs;
    child->prompt_logprobs_next = parent->prompt_logprobs_next;
    child->sample_index = i;
    child->arrival_time = parent->arrival_time;
    child->first_scheduled_time = parent->first_scheduled_time;
    child->detokenizer = std::make_unique<model::IncrementalDetokenizer>(tokenizer_.get());
    child->grammar = parent->grammar.Fork();  // the parent has not sampled yet: its start
    child->reasoning = parent->reasoning;
    Sequence* raw = child.get();
    seqs_[raw->id] = std::move(child);
    requests_.at(handle).live.push_back(raw->id);
    scheduler_->AddFork(parent, raw);
    sample_row_ = fork_row_;
    SampleOrFail(raw, absl::MakeSpan(sample_row_), now, timing);
  }
}

void Engine::Core::FillStats(EngineStats* stats) const {
  stats->num_running = static_cast<int32_t>(scheduler_->running().size());
  stats->num_blocks = kv_->num_blocks();
  stats->num_free_blocks = kv_->num_free_blocks();
  stats->kv_usage = kv_->usage();
  stats->num_cached_tokens = 0;
  for (const Sequence* s : scheduler_->running()) stats->num_cached_tokens += s->num_computed;
  stats->num_preemptions = scheduler_->num_preemptions();
  stats->prefix_cache_queries = scheduler_->prefix_cache_queries();
  stats->prefix_cache_hits = scheduler_->prefix_cache_hits();
  stats->prefix_cache_evictions = kv_->pool().num_evictions();
  stats->num_swap_outs = scheduler_->num_swap_outs();
  stats->num_swap_ins = scheduler_->num_swap_ins();
  stats->num_swapped = scheduler_->num_swapped();
  stats->num_swap_blocks = kv_->num_host_blocks();
  stats->num_free_swap_blocks = kv_->num_free_host_blocks();
  stats->num_steps = num_steps_;
  stats->num_aborted = num_aborted_;
  stats->last_step_time = last_step_time_;
  stats->tenants.clear();
  const std::vector<TenantState>& tenants = scheduler_->tenants();
  for (size_t i = 0; i < tenants.size(); ++i) {
    const TenantState& t = tenants[i];
    if (!t.configured && !t.active()) continue;
    stats->tenants.push_back(
        TenantStats{.name = t.config.name,
                    .num_running = t.num_running,
                    .num_waiting = t.num_waiting,
                    .num_blocks_held = scheduler_->blocks_held(static_cast<int32_t>(i)),
                    .served_tokens = t.served_tokens});
    if (const auto it = grammar_steps_.find(t.config.name); it != grammar_steps_.end()) {
      stats->tenants.back().grammar_steps = it->second;
    }
  }
}

}  // namespace pagoda::engine
