// What a caller submits to the engine and what the engine delivers back: the engine API
// the server and the offline CLI are written against.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

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
};

// One turn of a chat request.
struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ... (as the template knows them)
  std::string content;
};

struct GenerationRequest {
  std::string request_id;                 // client-visible id; generated when empty
  std::string prompt;                     // text, used when prompt_token_ids is empty
  std::vector<int32_t> prompt_token_ids;  // already tokenized prompt (no BOS is added)
  // A chat request: the prompt is the model's chat template rendered for these messages
  // (prompt and prompt_token_ids must be empty), tokenized with special tokens parsed.
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;  // chat: end with the assistant turn's header
  SamplingParams sampling;
  std::optional<int32_t> max_tokens;  // unset: up to the context length
  std::vector<std::string> stop;      // stop strings (never part of the delivered text)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;    // keep going after end-of-generation tokens
  bool parse_special = true;  // prompt text spelling a special token becomes that token
  int32_t priority = 0;       // lower runs first and is preempted last
  // Parallel samples, 1..16: the prompt is computed once and shared; sample i draws with
  // seed + i (the request's seed, or the one drawn at submission).
  int32_t n = 1;
  // The authenticated tenant (set by the server, never from the request body); "" is the
  // anonymous tenant. Also the key of anything shared between requests (prefix cache salt).
  std::string tenant;
};

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
  std::string text;                                  // text delta (valid UTF-8)
  std::vector<TokenLogprob> logprobs;                // one per token id, when requested
  FinishReason finish_reason = FinishReason::kNone;  // set on sample `index`'s last delivery
  absl::Status error;                                // why, when finish_reason is kError
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
