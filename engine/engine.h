// The engine: one thread owns the scheduler, the KV cache and the model, and runs steps
// (intake -> schedule -> execute -> sample -> detokenize -> deliver -> free). Other threads
// talk to it only through Submit() and Abort(), which are thread-safe and never block on a
// step. See docs/ARCHITECTURE.md for threads and ownership.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chat/tool_call_format.h"
#include "common/mutex.h"
#include "engine/engine_client.h"
#include "engine/injected_fault.h"
#include "engine/prefill_pacer.h"
#include "engine/request.h"
#include "engine/tenant.h"
#include "grammar/matcher.h"

namespace pagoda::gguf {
class GgufFile;
}
namespace pagoda::kernels {
class Backend;
}
namespace pagoda::model {
class Tokenizer;
struct LlamaConfig;
}  // namespace pagoda::model

namespace pagoda::engine {

// Wall time of the phases of one engine step, for profiling.
struct StepTiming {
  int32_t num_seqs = 0;    // sequences in the batch
  int32_t num_tokens = 0;  // tokens computed (== num_seqs for a pure decode step)
  absl::Duration schedule, execute, sample, detokenize, total;
};

// Receives the timing of every step; called on the engine thread.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Called after each step that ran a batch (success or failure).
  virtual void OnStep(const StepTiming& timing) = 0;
};

// True when all of `text` is valid UTF-8 (for the server, which never includes model/).
bool IsValidUtf8(std::string_view text);

// The defaults are the product's: `pagoda serve` with no flags runs exactly this config
// (tools/engine_flags.h reads its defaults from here; tests/engine_flags_test.cc checks).
struct EngineConfig {
  int32_t block_size = 16;
  int32_t num_blocks = 0;       // KV blocks; wins over kv_cache_memory when > 0
  int64_t kv_cache_memory = 0;  // bytes for the KV cache; 0 = 1 GiB
  int32_t max_batched_tokens = 2048;
  int32_t max_seqs = 256;
  int32_t max_queued_requests = 1024;  // waiting requests at most; 0 = unbounded
  // Sheddable tenants' requests are rejected while this many requests wait; 0 = max_seqs.
  int32_t shed_waiting_requests = 0;
  bool kv_cache = true;  // false: recompute every sequence at every step
  // Reuse the K/V of full blocks whose tokens (and tenant) match an earlier request's
  // (automatic prefix caching; docs/ARCHITECTURE.md). Off when kv_cache is false.
  bool enable_prefix_caching = true;
  // KV cache element type: "auto" (the backend's default: f16 on CPU), "f32", "f16", "bf16",
  // "int8" or "fp8"; the backend must support it (CPU: all but fp8; CUDA: all but int8).
  std::string kv_cache_dtype = "auto";
  // fp8 cache only: K/V are stored as value / kv_cache_fp8_scale in e4m3 (whose largest
  // finite value is 448; larger magnitudes saturate to it). Finite and > 0.
  float kv_cache_fp8_scale = 1.f;
  PolicyKind policy = PolicyKind::kAuto;  // see PolicyKind
  // When blocks run out, the victim recomputes or swaps out to `swap_space` bytes of host
  // memory (page-locked on CUDA), recomputing when that is full; kAuto picks by backend
  // (swap on CPU, recompute on CUDA). Off when kv_cache is false.
  PreemptionMode preemption_mode = PreemptionMode::kAuto;
  // Bytes, refused beyond the host memory available; 0 = the KV cache's size, at most half
  // the host memory available.
  int64_t swap_space = 0;
  // Prefill pacing (engine/prefill_pacer.h): while decodes or short prompts share a step
  // with a long prompt's prefill, its chunk is sized so the step takes at most this many
  // times a step without it. 0 = off (chunks take the whole budget); otherwise > 1.
  double max_decode_slowdown = 1.5;
  // For tests: when set, every step takes its prefill limits from this (called on the
  // engine thread) instead of the pacer, which makes paced schedules reproducible.
  std::function<PrefillLimits()> prefill_limits_override;
  // Request limits, checked in Submit before any tokenizing (docs/API.md, "Limits").
  int64_t max_prompt_bytes = 0;  // 0 = what the context can hold: context x longest token
  int32_t max_stop_strings = 16;
  int32_t max_stop_string_bytes = 256;
  // Chat template source overriding the model's tokenizer.chat_template (--chat-template);
  // empty = the model's.
  std::string chat_template;
  // How the model writes tool calls (--tool-call-parser); unset = read from the chat
  // template's source (chat::DetectToolCallFormat), or Hermes for a template that never
  // reads `tools` (it is then told the syntax in a system message, engine/chat_prompt.h).
  std::optional<chat::ToolCallFormat> tool_call_format;
  // What one constrained request's grammar may cost (grammar/matcher.h): its start and
  // first mask at intake, on the submitting thread; each later mask on the engine thread.
  grammar::MatcherLimits grammar_limits;
  StepObserver* step_observer = nullptr;
  // Tests only: a deliberate bug (engine/injected_fault.h) the differential tester must catch.
  InjectedFault injected_fault =
      InjectedFault::kNone;  // not owned; outlives the engine; null = no timing
};

// One tenant's share of the engine (EngineStats::tenants).
struct TenantStats {
  std::string name;
  int32_t num_running = 0;
  int32_t num_waiting = 0;      // includes the intake not yet seen by a step
  int32_t num_blocks_held = 0;  // KV blocks its running sequences hold
  int64_t served_tokens = 0;    // prompt + output tokens computed for it, ever
  // Grammar expansion steps its constrained requests cost, ever: at intake (their start
  // and first mask) and on the engine thread (their later masks).
  int64_t grammar_steps = 0;
};

// A snapshot of the engine's state, for metrics and health.
struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;  // queued, not yet running (includes preempted)
  int32_t num_blocks = 0;
  int32_t num_free_blocks = 0;
  double kv_usage = 0;            // fraction of blocks in use
  int64_t num_cached_tokens = 0;  // tokens whose K/V are in the cache (running sequences)
  int64_t num_preemptions = 0;
  int64_t num_steps = 0;
  int64_t num_aborted = 0;
  int64_t num_submitted = 0;  // requests Submit accepted, ever (rejected ones do no work)
  // Prefix cache, ever: tokens looked up and found at admissions, cached blocks evicted.
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  int64_t prefix_cache_evictions = 0;
  // Swap preemption: preemptions that swapped out and swap-ins, ever; sequences waiting
  // swapped out now; the swap space's blocks (0 without swap) and the free ones.
  int64_t num_swap_outs = 0;
  int64_t num_swap_ins = 0;
  int32_t num_swapped = 0;
  int32_t num_swap_blocks = 0;
  int32_t num_free_swap_blocks = 0;
  std::vector<TenantStats> tenants;  // configured tenants plus "" when it has requests
  absl::Time last_step_time = absl::InfinitePast();
};

// What clients may know of the model and the engine (GetModelInfo): no file paths.
struct ModelInfo {
  std::string architecture;
  int32_t vocab_size = 0;
  int32_t context_length = 0;
  int32_t num_layers = 0;
  int32_t hidden_size = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t bos_token_id = -1;
  int32_t eos_token_id = -1;
  std::vector<int32_t> eog_token_ids;
  std::string backend;
  std::string kv_cache_dtype;
  bool prefix_caching = false;  // automatic prefix caching is on
};

class ChatPrompt;
struct GrammarState;
class ReasoningState;

class Engine final : public EngineClient {
 public:
  // Loads the model and tokenizer from `file` onto `backend` and sizes the KV cache.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config,
                                                        std::unique_ptr<gguf::GgufFile> file,
                                                        std::unique_ptr<kernels::Backend> backend);
  ~Engine();

  // Starts the engine thread.
  void Start();
  // Stops the thread; requests still in flight get an Unavailable error output.
  void Stop();

  // Validates and queues a request; `sink` receives its outputs on the engine thread. A
  // grammar (sampling.grammar) is started here, on the caller's thread, within
  // EngineConfig::grammar_limits. InvalidArgument names the offending field or limit;
  // ResourceExhausted names the limit hit (the global queue, the tenant's max_queued_requests,
  // shedding of a sheddable tenant, or KV cache it can never get), checked before tokenizing;
  // Unavailable once stopped.
  absl::StatusOr<SubmitResult> Submit(GenerationRequest request,
                                      std::shared_ptr<OutputSink> sink) override;
  // Replaces the tenant table (weights, classes, limits, KV caps and floors); applies from
  // the next step, requests in flight keep running. InvalidArgument names a bad entry
  // (duplicate name, weight <= 0, negative limit, floors above the pool). Requests naming a
  // tenant that is not in the table run under default terms.
  absl::Status SetTenants(std::vector<TenantConfig> tenants);
  // Aborts a request: within one step its blocks are free and its sink gets finish
  // reason kAbort. Unknown or finished handles are ignored.
  void Abort(RequestHandle handle) override;
  // Holds the engine thread before its next step (a step in progress finishes) until
  // Resume(); requests submitted meanwhile enter together. For benchmarks and tests that
  // need a batch to arrive in one step.
  void Pause();
  void Resume();

  EngineStats Stats() const;
  ModelInfo model_info() const;
  // Token ids of `text` (BOS first when `add_bos`, unset: the model's default);
  // InvalidArgument for invalid UTF-8 or more than max_prompt_bytes ("text: ...").
  absl::StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, std::optional<bool> add_bos,
                                                bool parse_special) const;
  // The text of `ids` (a leading SentencePiece space stripped); InvalidArgument names an id
  // outside the vocabulary or more than kMaxDetokenizeIds ids ("token_ids: ...").
  absl::StatusOr<std::string> Detokenize(const std::vector<int32_t>& ids) const;
  // The most ids Detokenize takes (as many as an HTTP body's JSON may hold values).
  static constexpr size_t kMaxDetokenizeIds = size_t{1} << 20;
  // The prompt text the chat template makes of `messages` (without the BOS tokenization
  // adds). FailedPrecondition when the model has no usable template; InvalidArgument
  // ("messages: ...") for an empty list, invalid UTF-8, more than max_prompt_bytes or a
  // conversation the template refuses; Unimplemented for a construct outside the subset.
  // `tools` (may be null: none) is the template's `tools` variable, as
  // GenerationRequest::chat_tools; `kwargs` (may be null) as chat_template_kwargs.
  absl::StatusOr<std::string> RenderChat(const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json* tools = nullptr,
                                         const nlohmann::json* kwargs = nullptr) const;
  // The bytes token `id` adds to a text: "" for a control token (EOS) or an id outside the
  // vocabulary; may be part of a UTF-8 character (a byte token).
  std::string TokenBytes(int32_t id) const;
  // The tool-call format of the model's output: EngineConfig::tool_call_format, or what the
  // chat template teaches (Hermes for one that never reads `tools`).
  chat::ToolCallFormat tool_call_format() const { return tool_call_format_; }
  // The chat template's source (--chat-template or the model's); "" when there is no usable
  // one. The server reads its reasoning markers from it (chat::DetectReasoningFormat).
  std::string_view chat_template_source() const;
  const model::Tokenizer& tokenizer() const;
  const model::LlamaConfig& model_config() const;
  const EngineConfig& config() const { return config_; }
  // The prompt limit in effect (EngineConfig::max_prompt_bytes, or what it defaults to).
  int64_t max_prompt_bytes() const { return max_prompt_bytes_; }
  std::string backend_name() const;

 private:
  class Core;  // state owned by the engine thread
  struct Pending {
    RequestHandle handle;
    GenerationRequest request;
    std::vector<int32_t> prompt;
    int32_t max_total_tokens;
    uint64_t seed;
    absl::Time arrival;
    std::shared_ptr<OutputSink> sink;
    std::unique_ptr<GrammarState> grammar;      // started at intake; null without a grammar
    std::unique_ptr<ReasoningState> reasoning;  // null without request.reasoning
  };

  explicit Engine(EngineConfig config);
  // The most KV cache one request may hold: `tokens`, and what limits it, for messages.
  struct KvLimit {
    int64_t tokens = 0;
    std::string holder;
  };
  absl::Status Validate(const GenerationRequest& request, const KvLimit& limit,
                        std::vector<int32_t>* prompt, int32_t* max_total_tokens) const;
  // Parts of Validate: the stop strings and stop token ids; the prompt (text, token ids or
  // chat messages) checked and tokenized into `prompt`.
  absl::Status ValidateStops(const GenerationRequest& request, int32_t vocab) const;
  absl::Status EncodePrompt(const GenerationRequest& request, std::vector<int32_t>* prompt) const;
  // The queue, tenant and shedding limits for a request of `tenant` with `n` samples (run
  // slots: n <= max_seqs and the tenant's max_running_requests); fills `limit`.
  absl::Status CheckAdmission(const std::string& tenant, int32_t n, KvLimit* limit) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The one view of requests in flight that Stats() returns and admission counts: the last
  // step's figures (the intake a step took counts as waiting until it ends) plus the
  // intake since, in all and per tenant.
  EngineStats StatsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The configured terms of `tenant`, or null (default terms).
  const TenantConfig* FindTenant(const std::string& tenant) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();

  EngineConfig config_;
  int64_t max_prompt_bytes_ = 0;  // the effective prompt limit (see EngineConfig)
  std::unique_ptr<Core> core_;
  std::unique_ptr<ChatPrompt> chat_;
  chat::ToolCallFormat tool_call_format_ = chat::ToolCallFormat::kNone;
  std::thread thread_;

  mutable Mutex mu_;
  std::deque<Pending> intake_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestHandle> aborts_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool has_work_ ABSL_GUARDED_BY(mu_) = false;  // the core has sequences in flight
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  RequestHandle next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<TenantConfig> tenants_ ABSL_GUARDED_BY(mu_);  // the table SetTenants gave
  absl::flat_hash_map<std::string, size_t> tenant_index_ ABSL_GUARDED_BY(mu_);  // into tenants_
  bool tenants_changed_ ABSL_GUARDED_BY(mu_) = false;  // not yet applied by the engine thread
  // intake_ per tenant name (cleared when the engine thread takes the intake).
  absl::flat_hash_map<std::string, int32_t> intake_by_tenant_ ABSL_GUARDED_BY(mu_);
  // Grammar steps spent at intake (Submit), per tenant name, ever.
  absl::flat_hash_map<std::string, int64_t> intake_grammar_steps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda::engine
