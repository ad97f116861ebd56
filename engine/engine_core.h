// The engine thread's state and one step of work. Internal to engine/: only Engine uses it,
// and only from its own thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/engine.h"
#include "engine/kv_cache_manager.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/prefill_pacer.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kernels/backend.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"

namespace pagoda::engine {

class Engine::Core {
 public:
  // Loads everything; sizes the KV cache from `config`.
  static absl::StatusOr<std::unique_ptr<Core>> Create(const EngineConfig& config,
                                                      const gguf::GgufFile& file,
                                                      std::unique_ptr<kernels::Backend> backend);

  // Takes ownership of a validated request (its sample 0; the others fork from it once its
  // prompt is computed) and queues it.
  void Add(std::unique_ptr<Sequence> seq);
  // Aborts every sample of `handle` if it is in flight.
  void Abort(RequestHandle handle);
  // Ends every sequence in flight with an error.
  void FailAll(const absl::Status& status);
  // Runs one scheduling step; no-op when nothing can run.
  void Step();
  // Applies a validated tenant table; with PolicyKind::kAuto a non-empty table switches
  // to fair share and an empty one back to FCFS.
  void SetTenants(const std::vector<TenantConfig>& tenants);

  bool has_work() const { return !seqs_.empty(); }
  int32_t num_waiting() const { return static_cast<int32_t>(scheduler_->waiting().size()); }
  // Fills the scheduler/cache fields of `stats` and its tenants (configured ones, and
  // others while they have requests in flight).
  void FillStats(EngineStats* stats) const;

  const model::Tokenizer& tokenizer() const { return *tokenizer_; }
  // The vocabulary's token trie for grammar masks (thread-safe through a MaskCache).
  const grammar::TokenMasker& masker() const { return *masker_; }
  const model::LlamaConfig& model_config() const { return model_->config(); }
  const kernels::Backend& backend() const { return *backend_; }
  const KvCacheManager& kv() const { return *kv_; }
  kernels::DType kv_dtype() const { return kv_dtype_; }

 private:
  Core() = default;
  // One request in flight: its samples and what its last delivery reports.
  struct RequestState {
    int32_t unfinished = 0;   // samples not finished, forks not yet made included
    std::vector<SeqId> live;  // samples in flight
    Usage usage;              // accumulated as samples finish
  };

  // Frees the sample's blocks, forgets it and delivers its final output (index, samples
  // left and, for the request's last, the usage filled in).
  void Finish(Sequence* seq, GenerationOutput final_output);
  // Finishes every sample of `handle` with `reason` (and `error`).
  void EndRequest(RequestHandle handle, FinishReason reason, const absl::Status& error);
  // Ends the requests of sequences that can never run again under the tenant terms now
  // (Scheduler::Unsatisfiable): an explicit error instead of a stream that stalls.
  void EndUnsatisfiable();
  // Samples and delivers the next token of each chunk that completed its sequence.
  // `timing` (null unless profiling) gets the sampling and detokenizing times.
  void ProcessOutputs(const SchedulerOutput& out, std::vector<float>& logits, StepTiming* timing);
  // Samples `seq`'s next token from `logits` (modified) and delivers it.
  void SampleAndDeliver(Sequence* seq, absl::Span<float> logits, absl::Time now,
                        StepTiming* timing);
  // Fills `out` (the sample's first delivery) with the prompt and its logprobs, when the
  // request asked for them.
  void AttachPrompt(Sequence* seq, GenerationOutput* out);
  // Creates the pending samples of `parent`, whose prompt was just computed: they share its
  // blocks and sample their first token from copies of its `logits` row.
  void Fork(Sequence* parent, absl::Span<const float> logits, absl::Time now, StepTiming* timing);
  // SampleAndDeliver, ending the sample with an error (and its request after the step:
  // FailRequestsAfterStep) when it throws.
  void SampleOrFail(Sequence* seq, absl::Span<float> logits, absl::Time now, StepTiming* timing);
  // Ends the sample with `error` now, and the rest of its request once the step's outputs
  // are processed (its other samples may still be in this step's chunks).
  void FailSample(SeqId id, const absl::Status& error);

  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<model::Tokenizer> tokenizer_;
  std::unique_ptr<model::LlamaModel> model_;
  kernels::DeviceBuffer kv_buffer_;
  kernels::DeviceBuffer swap_buffer_;  // host swap space (swap preemption only)
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<OutputProcessor> processor_;
  std::unique_ptr<PrefillPacer> pacer_;
  std::function<PrefillLimits()> limits_override_;  // EngineConfig::prefill_limits_override
  absl::flat_hash_map<SeqId, std::unique_ptr<Sequence>> seqs_;
  absl::flat_hash_map<RequestHandle, RequestState> requests_;
  std::vector<float> logits_;
  std::vector<float> fork_row_, sample_row_;  // a forked prompt's logits and a copy to sample
  std::unique_ptr<const grammar::TokenMasker> masker_;  // the vocabulary's trie
  grammar::TokenBitmask forced_mask_;                   // the one token a forced sample may be
  grammar::TokenBitmask grammar_mask_;                  // the mask of the sequence being sampled
  // Grammar expansion steps of masks and accepted tokens, per tenant name, ever.
  absl::flat_hash_map<std::string, int64_t> grammar_steps_;
  // Requests a sample of which failed this step (FailSample), ended after it.
  absl::flat_hash_map<RequestHandle, absl::Status> failed_requests_;
  StepObserver* observer_ = nullptr;
  kernels::DType kv_dtype_ = kernels::DType::kF32;
  std::string cache_salt_;  // the model part of the prefix cache's salt
  PolicyKind policy_kind_ = PolicyKind::kAuto;
  bool fair_share_ = false;  // the scheduler runs FairSharePolicy
  int64_t num_steps_ = 0;
  int64_t num_aborted_ = 0;
  absl::Time last_step_time_ = absl::InfinitePast();
};

}  // namespace pagoda::engine
