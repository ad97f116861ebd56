// What a caller submits to the engine and what the engine delivers back: the engine API
// the server and the offline CLI are written against.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "nlohmann/json_fwd.hpp"

namespace pagoda::grammar {
class Grammar;
}  // namespace pagoda::grammar

namespace pagoda::engine {

struct SamplingParams {
  float temperature = 1.f;          // 0 = greedy
  int32_t top_k = 0;                // 0 = off
  float top_p = 1.f;                // in (0, 1]
  float min_p = 0.f;                // in [0, 1]
  float repetition_penalty = 1.f;   // > 0; 1 = off (prompt and output tokens)
  float presence_penalty = 0.f;     // over output tokens
  float frequency_penalty = 0.f;    // over output tokens
  std::optional<uint64_t> seed;     // unset: drawn at submission
  std::optional<int32_t> logprobs;  // unset: none; N in [0, 20]: chosen token plus top-N
  // Unset: none. N in [0, 20]: each prompt token's logprob given the tokens before it (the
  // first token has none) plus the top N there, from the raw logits, delivered as
  // GenerationOutput::prompt_logprobs. Such a request reuses no prefix-cache block whose
  // positions' logits it still needs (it computes its whole prompt).
  std::optional<int32_t> prompt_logprobs;
  // (token id, bias in [-100, 100]) added to that token's logit before penalties and
  // sampling, greedy included; at most 300 entries, each id once (ValidateLogitBias).
  // Logprobs stay those of the raw logits.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Constrained decoding (grammar/json_schema.h): when set, each step's logits outside the
  // tokens that keep the output a prefix of the grammar's language are -inf before
  // sampling (on the host), and end-of-generation tokens are allowed only where it may end.
  std::shared_ptr<const grammar::Grammar> grammar;
};

// A call an assistant turn made (OpenAI's message.tool_calls[]), given back to the template.
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as OpenAI sends it
};

// One turn of a chat request.
struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ... (as the template knows them)
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // an assistant turn's calls
  std::string tool_call_id;              // a "tool" turn: the call this result answers
  // An assistant turn's reasoning, given back to the template as `reasoning_content` (a
  // template that drops earlier turns' reasoning ignores it); "" leaves it undefined.
  std::string reasoning_content;
};

// Reasoning output (docs/API.md "Reasoning"): a model that writes its reasoning between an
// open and a close marker ("<think>" ... "</think>") before its answer.
struct ReasoningSpec {
  std::string open;   // "" : the output has no reasoning section
  std::string close;  // the marker that ends the reasoning
  // The output starts inside the reasoning even without `open` (DeepSeek-R1's parser). It
  // also does when the prompt ends with `open` (a template that opens the reasoning for
  // the model); otherwise only when the output starts with open's tokens.
  bool starts_open = false;
  // At most this many tokens of reasoning, then the close marker's tokens are forced (one a
  // step). Unset: no limit.
  std::optional<int32_t> max_tokens;
};

// The most tokens a validated request can cost: its prompt (computed once) plus n times
// its completion budget (max_tokens, or what the context leaves when unset).
struct TokenCost {
  int32_t prompt_tokens = 0;
  int32_t max_completion_tokens = 0;  // per sample
  int32_t n = 1;
  int64_t total() const { return prompt_tokens + int64_t{n} * max_completion_tokens; }
};

struct GenerationRequest {
  std::string request_id;                 // client-visible id; generated when empty
  std::string prompt;                     // text, used when prompt_token_ids is empty
  std::vector<int32_t> prompt_token_ids;  // already tokenized prompt (no BOS is added)
  // A chat request: the prompt is the model's chat template rendered for these messages
  // (prompt and prompt_token_ids must be empty), tokenized with special tokens parsed in
  // the template's text only (see chat_content_special).
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;  // chat: end with the assistant turn's header
  // Chat: the template's `tools` variable (chat::ToolsTemplateJson: OpenAI's tool objects);
  // null: the request offers no tools. Its strings are content, as the messages' are.
  std::shared_ptr<const nlohmann::ordered_json> chat_tools;
  // Chat: more template variables (chat_template_kwargs: enable_thinking, reasoning_effort,
  // ...), a JSON object; null: none. Names the template gets from the engine (messages,
  // tools, bos_token, ...) are refused.
  std::shared_ptr<const nlohmann::json> chat_template_kwargs;
  // The output's reasoning section (empty `open`: none). While the output is inside it the
  // sampling grammar waits: it constrains the answer after the close marker.
  ReasoningSpec reasoning;
  SamplingParams sampling;
  // Unset: up to the context length. 0 only with sampling.prompt_logprobs: the prompt is
  // computed and reported, no token generated (finish_reason kLength).
  std::optional<int32_t> max_tokens;
  std::vector<std::string> stop;  // stop strings (never part of the delivered text)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;    // keep going after end-of-generation tokens
  bool parse_special = true;  // prompt text spelling a special token becomes that token
  int32_t priority = 0;       // lower runs first and is preempted last
  // Chat: message content spelling a special token becomes that token too (an opt-in for
  // trusted callers: gRPC Chat with parse_special set true). Off, only the template's own
  // markup yields special tokens; content is plain text.
  bool chat_content_special = false;
  // Parallel samples, 1..16: the prompt is computed once and shared; sample i draws with
  // seed + i (the request's seed, or the one drawn at submission).
  int32_t n = 1;
  // The authenticated tenant (set by the server, never from the request body); "" is the
  // anonymous tenant. Also the key of anything shared between requests (prefix cache salt).
  std::string tenant;
  // The prefix cache for this request (llama.cpp's `cache_prompt`): false, it reuses no
  // cached block and leaves none for later requests (its own samples still share its
  // prompt's blocks).
  bool cache_prompt = true;
  // vLLM's `cache_salt`: blocks this request caches are found only by requests of the same
  // tenant with the same salt, so users of one tenant cannot probe each other's prompts by
  // timing. At most kMaxCacheSaltBytes; "" is the tenant's shared cache.
  std::string cache_salt;
  // Called by Engine::Submit once the request is validated and before it is queued, on the
  // submitting thread with no engine lock held; an error refuses the request with that
  // status. The server reserves the tenant's rate-limit tokens here
  // (server/token_reservation.h). Not kept after Submit returns.
  std::function<absl::Status(const TokenCost&)> admit;
};

inline constexpr size_t kMaxCacheSaltBytes = 256;

enum class FinishReason { kNone, kStop, kLength, kAbort, kError };
// "stop", "length", "abort", "error" or "" for kNone.
const char* FinishReasonName(FinishReason reason);

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;
  absl::Duration queue_time;           // arrival to first scheduled
  absl::Duration time_to_first_token;  // arrival to first output token
};

// One delivery to a sink: only what is new since the last one, of one sample.
struct GenerationOutput {
  int32_t index = 0;  // the sample (0 .. n-1) these tokens belong to
  std::vector<int32_t> token_ids;
  std::string text;                    // text delta (valid UTF-8)
  std::vector<TokenLogprob> logprobs;  // one per token id, when requested
  // A sample's first delivery, when sampling.prompt_logprobs is set: the prompt's token ids
  // and the logprobs of prompt tokens 1.. (one fewer entry: the first token has none).
  std::vector<int32_t> prompt_token_ids;
  std::vector<TokenLogprob> prompt_logprobs;
  FinishReason finish_reason = FinishReason::kNone;  // set on sample `index`'s last delivery
  absl::Status error;                                // why, when finish_reason is kError
  // A sample's first delivery, with request.reasoning: the output starts inside the
  // reasoning (starts_open, or the prompt ended with the open marker).
  bool reasoning_open = false;
  int32_t samples_left = 0;  // samples of the request not finished after this delivery
  Usage usage;               // complete on the request's last delivery (all samples)

  // The request's last delivery: every sample finished.
  bool finished() const { return finish_reason != FinishReason::kNone && samples_left == 0; }
  // Sample `index`'s last delivery.
  bool sample_finished() const { return finish_reason != FinishReason::kNone; }
};

// Receives a request's outputs, on the engine thread, in order (per sample); the last one
// is finished().
// Implementations must not block.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void OnOutput(GenerationOutput output) = 0;
};

}  // namespace pagoda::engine
