#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/chat_prompt.h"
#include "engine/engine_core.h"
#include "engine/grammar_state.h"
#include "engine/request_validation.h"
#include "engine/sampler.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/utf8.h"
#include "nlohmann/json.hpp"

namespace pagoda::engine {
const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config,
                                                       std::unique_ptr<gguf::GgufFile> file,
                                                       std::unique_ptr<kernels::Backend> backend) {
  if (config.block_size <= 0 || config.block_size > 1024) {
    return Invalid("block_size", "must be in [1, 1024]");
  }
  if (config.max_batched_tokens <= 0) return Invalid("max_batched_tokens", "must be positive");
  if (config.max_seqs <= 0) return Invalid("max_seqs", "must be positive");
  if (config.max_decode_slowdown != 0 && !(config.max_decode_slowdown > 1)) {
    return Invalid("max_decode_slowdown", "must be 0 (off) or greater than 1");
  }
  if (config.max_prompt_bytes < 0 || config.max_stop_strings < 0 ||
      config.max_stop_string_bytes <= 0) {
    return Invalid("request limits", "must be >= 0 (max_stop_string_bytes > 0)");
  }
  std::unique_ptr<Engine> engine(new Engine(config));
  ASSIGN_OR_RETURN(engine->core_, Core::Create(config, *file, std::move(backend)));
  engine->max_prompt_bytes_ = config.max_prompt_bytes;
  if (engine->max_prompt_bytes_ == 0) {
    // No token covers more input bytes than its piece's bytes (an unknown character, at
    // most 4 bytes, may become one token): more bytes than context x that cannot fit.
    const model::Tokenizer& tok = engine->core_->tokenizer();
    int64_t longest = 4;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      longest = std::max<int64_t>(longest, static_cast<int64_t>(tok.Piece(id).size()));
    }
    engine->max_prompt_bytes_ = longest * engine->core_->model_config().context_length;
  }
  {
    const model::Tokenizer& tok = engine->core_->tokenizer();
    ASSIGN_OR_RETURN(
        engine->chat_,
        ChatPrompt::Create(*file, config.chat_template, std::string(tok.Piece(tok.bos_id())),
                           std::string(tok.Piece(tok.eos_id())), tok.add_bos()));
    // A template that never reads `tools` gets them in a system message, in Hermes form.
    engine->tool_call_format_ = config.tool_call_format.value_or(
        engine->chat_->reads_tools() ? chat::DetectToolCallFormat(engine->chat_->source())
                                     : chat::ToolCallFormat::kHermes);
    engine->chat_->set_tool_call_format(engine->tool_call_format_);
  }
  {
    MutexLock lock(&engine->mu_);
    engine->core_->FillStats(&engine->stats_);
  }
  return engine;
}

Engine::Engine(EngineConfig config) : config_(config) {}

Engine::~Engine() { Stop(); }

void Engine::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void Engine::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // Whatever never reached the engine thread still gets an answer.
  std::deque<Pending> left;
  {
    MutexLock lock(&mu_);
    left.swap(intake_);
    intake_by_tenant_.clear();
  }
  for (Pending& p : left) {
    GenerationOutput out;
    out.finish_reason = FinishReason::kError;
    out.error = absl::UnavailableError("engine stopped");
    out.usage.prompt_tokens = static_cast<int32_t>(p.prompt.size());
    p.sink->OnOutput(std::move(out));
  }
}

bool IsValidUtf8(std::string_view text) { return model::IsValidUtf8(text); }

std::string Engine::TokenBytes(int32_t id) const {
  const model::Tokenizer& tok = tokenizer();
  if (id < 0 || id >= tok.vocab_size()) return "";
  return tok.TokenBytes(id);
}

const model::Tokenizer& Engine::tokenizer() const { return core_->tokenizer(); }
const model::LlamaConfig& Engine::model_config() const { return core_->model_config(); }
std::string Engine::backend_name() const { return core_->backend().name(); }

const TenantConfig* Engine::FindTenant(const std::string& tenant) const {
  const auto it = tenant_index_.find(tenant);
  return it == tenant_index_.end() ? nullptr : &tenants_[it->second];
}

// A tenant's queue counts its waiting requests (preempted ones and the intake included)
// beyond the run slots free for it after the last step (min of its max_running_requests
// headroom and the engine's max_seqs headroom): a request that the next step would admit
// at once is not queued. KV blocks are not looked at.
// The global max_queued_requests counts the same way over the engine's max_seqs: a burst
// that fits in the free run slots is admitted whole.
absl::Status Engine::CheckAdmission(const std::string& tenant, int32_t n, KvLimit* limit) const {
  if (stop_) return absl::UnavailableError("engine is stopped");
  // The n samples run at once: a request needing more run slots than exist never runs.
  if (n > config_.max_seqs) {
    return Invalid(
        "n", absl::StrCat(n, " samples run at once, more than max_seqs (", config_.max_seqs, ")"));
  }
  const EngineStats now = StatsLocked();
  const int64_t waiting = now.num_waiting;
  const int64_t free_slots = std::max<int64_t>(int64_t{config_.max_seqs} - now.num_running, 0);
  if (config_.max_queued_requests > 0 && waiting - free_slots >= config_.max_queued_requests) {
    return absl::ResourceExhaustedError(
        absl::StrCat("queue full: ", waiting - free_slots, " requests waiting beyond ", free_slots,
                     " free run slots (max_queued_requests = ", config_.max_queued_requests, ")"));
  }
  const TenantConfig* t = FindTenant(tenant);
  const std::string who = absl::StrCat("tenant \"", tenant, "\"");
  // The floors of the other tenants are never this one's; its cap bounds it.
  const KvCacheManager& kv = core_->kv();
  int64_t others_floors = 0;
  for (const TenantConfig& other : tenants_) {
    if (other.name != tenant) others_floors += other.kv_cache_floor_blocks;
  }
  const KvBlockLimit blocks = TenantKvLimit(t, tenant, others_floors, kv.num_blocks());
  limit->holder = blocks.holder;
  limit->tokens = blocks.blocks * kv.block_size();
  if (t == nullptr) return absl::OkStatus();
  if (n > RunSlotsLeft(*t, 0)) {
    return Invalid("n", absl::StrCat(n, " samples run at once, more than ", who,
                                     "'s max_running_requests (", t->max_running_requests, ")"));
  }
  if (t->max_queued_requests > 0) {
    int64_t tenant_waiting = 0;
    int32_t tenant_running = 0;
    for (const TenantStats& ts : now.tenants) {
      if (ts.name == tenant) {
        tenant_waiting = ts.num_waiting;
        tenant_running = ts.num_running;
      }
    }
    const int64_t headroom = std::min<int64_t>(int64_t{config_.max_seqs} - now.num_running,
                                               RunSlotsLeft(*t, tenant_running));
    const int64_t queued = tenant_waiting - std::max<int64_t>(headroom, 0);
    if (queued >= t->max_queued_requests) {
      return absl::ResourceExhaustedError(
          absl::StrCat(who, ": max_queued_requests (", t->max_queued_requests, ") reached"));
    }
  }
  if (t->priority == PriorityClass::kSheddable) {
    const int64_t threshold =
        config_.shed_waiting_requests > 0 ? config_.shed_waiting_requests : config_.max_seqs;
    if (waiting >= threshold) {
      return absl::ResourceExhaustedError(absl::StrCat(who, ": sheddable requests are shed while ",
                                                       waiting, " requests wait (threshold ",
                                                       threshold, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SubmitResult> Engine::Submit(GenerationRequest request,
                                            std::shared_ptr<OutputSink> sink) {
  KvLimit limit;
  {
    // Limits first: a request turned away costs no tokenization and no engine work.
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckAdmission(request.tenant, request.n, &limit));
  }
  Pending p;
  RETURN_IF_ERROR(Validate(request, limit, &p.prompt, &p.max_total_tokens));
  if (request.admit) {
    const auto prompt_tokens = static_cast<int32_t>(p.prompt.size());
    RETURN_IF_ERROR(request.admit({.prompt_tokens = prompt_tokens,
                                   .max_completion_tokens = p.max_total_tokens - prompt_tokens,
                                   .n = request.n}));
    request.admit = nullptr;
  }
  if (request.sampling.grammar != nullptr) {
    // Its start and first mask here, never on the engine thread: the worst a grammar can
    // do is cost its own request the limits' worth of this thread's time.
    absl::StatusOr<GrammarState> started =
        StartGrammar(core_->masker(), request.sampling.grammar, config_.grammar_limits);
    if (!started.ok()) return started.status();
    p.grammar = std::make_unique<GrammarState>(*std::move(started));
  }
  if (!request.reasoning.open.empty() || !request.reasoning.close.empty()) {
    absl::StatusOr<ReasoningState> reasoning = ReasoningState::Start(
        core_->tokenizer(), request.reasoning, p.prompt, request.sampling.grammar != nullptr);
    if (!reasoning.ok()) return reasoning.status();
    p.reasoning = std::make_unique<ReasoningState>(*std::move(reasoning));
  }
  request.prompt.clear();
  request.prompt_token_ids.clear();
  request.messages.clear();
  request.chat_tools.reset();
  request.chat_template_kwargs.reset();
  SubmitResult result;
  result.prompt_tokens = static_cast<int32_t>(p.prompt.size());
  MutexLock lock(&mu_);
  // Again: other requests may have been queued while this one was tokenized.
  KvLimit unused;
  RETURN_IF_ERROR(CheckAdmission(request.tenant, request.n, &unused));
  p.handle = next_handle_++;
  if (request.request_id.empty()) request.request_id = absl::StrCat("req-", p.handle);
  result.handle = p.handle;
  result.request_id = request.request_id;
  if (request.sampling.seed.has_value()) {
    p.seed = *request.sampling.seed;
  } else {
    static thread_local std::mt19937_64 rng(std::random_device{}());
    p.seed = rng();
  }
  ++intake_by_tenant_[request.tenant];
  if (p.grammar != nullptr) intake_grammar_steps_[request.tenant] += p.grammar->steps();
  ++stats_.num_submitted;
  p.request = std::move(request);
  p.arrival = absl::Now();
  p.sink = std::move(sink);
  intake_.push_back(std::move(p));
  return result;
}

absl::Status Engine::SetTenants(std::vector<TenantConfig> tenants) {
  absl::flat_hash_map<std::string, int> seen;
  int64_t floors = 0;
  for (const TenantConfig& t : tenants) {
    const std::string who = absl::StrCat("tenant \"", t.name, "\"");
    if (!seen.emplace(t.name, 1).second) return Invalid(who, "appears twice");
    if (!(t.weight > 0) || std::isinf(t.weight)) return Invalid(who, "weight must be > 0");
    if (t.max_running_requests < 0 || t.max_queued_requests < 0 || t.kv_cache_cap_blocks < 0 ||
        t.kv_cache_floor_blocks < 0) {
      return Invalid(who, "limits must be >= 0 (0 = no limit)");
    }
    if (t.kv_cache_cap_blocks > 0 && t.kv_cache_floor_blocks > t.kv_cache_cap_blocks) {
      return Invalid(who, "kv_cache_floor_blocks exceeds kv_cache_cap_blocks");
    }
    floors += t.kv_cache_floor_blocks;
  }
  if (floors > core_->kv().num_blocks()) {
    return Invalid("kv_cache_floor_blocks",
                   absl::StrCat("floors add up to ", floors, " blocks; the pool has ",
                                core_->kv().num_blocks()));
  }
  MutexLock lock(&mu_);
  tenants_ = std::move(tenants);
  tenant_index_.clear();
  for (size_t i = 0; i < tenants_.size(); ++i) tenant_index_[tenants_[i].name] = i;
  tenants_changed_ = true;
  return absl::OkStatus();
}

void Engine::Pause() {
  MutexLock lock(&mu_);
  paused_ = true;
}

void Engine::Resume() {
  MutexLock lock(&mu_);
  paused_ = false;
}

void Engine::Abort(RequestHandle handle) {
  MutexLock lock(&mu_);
  aborts_.push_back(handle);
}

namespace {

// The entry of `name` in `stats`, appended when missing.
TenantStats& TenantEntry(EngineStats* stats, const std::string& name) {
  for (TenantStats& t : stats->tenants) {
    if (t.name == name) return t;
  }
  stats->tenants.push_back(TenantStats{.name = name});
  return stats->tenants.back();
}

}  // namespace

ModelInfo Engine::model_info() const {
  const model::LlamaConfig& c = core_->model_config();
  const model::Tokenizer& tok = core_->tokenizer();
  ModelInfo info{.architecture = c.architecture,
                 .vocab_size = c.vocab_size,
                 .context_length = c.context_length,
                 .num_layers = c.num_layers,
                 .hidden_size = c.dim,
                 .num_heads = c.num_heads,
                 .num_kv_heads = c.num_kv_heads,
                 .head_dim = c.head_dim,
                 .bos_token_id = tok.bos_id(),
                 .eos_token_id = tok.eos_id(),
                 .eog_token_ids = tok.eog_ids(),
                 .backend = core_->backend().name(),
                 .kv_cache_dtype = std::string(kernels::DTypeName(core_->kv_dtype())),
                 .prefix_caching = core_->kv().prefix_caching()};
  return info;
}

absl::StatusOr<std::vector<int32_t>> Engine::Tokenize(std::string_view text,
                                                      std::optional<bool> add_bos,
                                                      bool parse_special) const {
  if (static_cast<int64_t>(text.size()) > max_prompt_bytes_) {
    return Invalid("text", absl::StrCat("has ", text.size(), " bytes; at most ", max_prompt_bytes_,
                                        " are accepted (max_prompt_bytes)"));
  }
  if (!model::IsValidUtf8(text)) return Invalid("text", "is not valid UTF-8");
  const model::Tokenizer& tok = core_->tokenizer();
  return tok.Encode(text, add_bos.value_or(tok.add_bos()), parse_special);
}

absl::StatusOr<std::string> Engine::Detokenize(const std::vector<int32_t>& ids) const {
  if (ids.size() > kMaxDetokenizeIds) {
    return Invalid("token_ids",
                   absl::StrCat(ids.size(), " ids; at most ", kMaxDetokenizeIds, " are accepted"));
  }
  const model::Tokenizer& tok = core_->tokenizer();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= tok.vocab_size()) {
      return Invalid("token_ids",
                     absl::StrCat(ids[i], " at index ", i, " is outside the vocabulary"));
    }
  }
  return tok.Decode(ids, /*strip_leading_space=*/true);
}

EngineStats Engine::Stats() const {
  MutexLock lock(&mu_);
  return StatsLocked();
}

EngineStats Engine::StatsLocked() const {
  EngineStats s = stats_;
  s.num_waiting += static_cast<int32_t>(intake_.size());
  for (const auto& [name, count] : intake_by_tenant_) TenantEntry(&s, name).num_waiting += count;
  for (TenantStats& t : s.tenants) {  // the tenants listed (configured or active) only
    if (const auto it = intake_grammar_steps_.find(t.name); it != intake_grammar_steps_.end()) {
      t.grammar_steps += it->second;
    }
  }
  return s;
}

void Engine::Loop() {
  while (true) {
    std::deque<Pending> intake;
    std::vector<RequestHandle> aborts;
    std::optional<std::vector<TenantConfig>> tenants;
    {
      MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || (!paused_ &&
                         (has_work_ || !intake_.empty() || !aborts_.empty() || tenants_changed_));
      };
      mu_.Await(ready);
      if (stop_) break;
      intake.swap(intake_);
      aborts.swap(aborts_);
      if (tenants_changed_) tenants = tenants_;
      tenants_changed_ = false;
      // Until this step ends, the intake counts as waiting (for the queue bounds too).
      stats_.num_waiting += static_cast<int32_t>(intake.size());
      for (const auto& [name, count] : intake_by_tenant_) {
        TenantEntry(&stats_, name).num_waiting += count;
      }
      intake_by_tenant_.clear();
    }
    if (tenants.has_value()) core_->SetTenants(*tenants);
    for (Pending& p : intake) {
      auto seq = std::make_unique<Sequence>();
      seq->id = SampleSeqId(p.handle, 0);
      seq->pending_forks = p.request.n - 1;
      seq->request = std::move(p.request);
      seq->sink = std::move(p.sink);
      seq->tokens = std::move(p.prompt);
      seq->prompt_len = seq->num_tokens();
      seq->max_total_tokens = p.max_total_tokens;
      seq->seed = p.seed;
      seq->arrival_time = p.arrival;
      seq->detokenizer = std::make_unique<model::IncrementalDetokenizer>(&core_->tokenizer());
      if (p.grammar != nullptr) seq->grammar = std::move(*p.grammar);
      if (p.reasoning != nullptr) seq->reasoning = *p.reasoning;
      core_->Add(std::move(seq));
    }
    for (RequestHandle h : aborts) core_->Abort(h);
    try {
      core_->Step();
    } catch (const std::exception& e) {
      // A step that throws outside any one request's sampling (which ends only that
      // request) fails what is in flight; the engine thread goes on serving.
      core_->FailAll(absl::InternalError(absl::StrCat("engine step failed: ", e.what())));
    }
    MutexLock lock(&mu_);
    has_work_ = core_->has_work();
    core_->FillStats(&stats_);
    stats_.num_waiting = core_->num_waiting();
  }
  core_->FailAll(absl::UnavailableError("engine stopped"));
  MutexLock lock(&mu_);
  has_work_ = false;
  core_->FillStats(&stats_);
}

}  // namespace pagoda::engine
