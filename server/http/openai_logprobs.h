// The "logprobs" of OpenAI choices, from the engine's TokenLogprob of each token (the same
// values gRPC reports), lined up with the choice's text as it is sent: a streamed event
// carries the logprobs of the tokens whose text it carries. Text the engine holds back (a
// possible stop string, an incomplete UTF-8 character) holds its tokens back too; tokens
// whose text a stop string removed go with the choice's last event.
//
// Completions (legacy OpenAI shape):
//   {"tokens": [str], "token_logprobs": [num], "top_logprobs": [{str: num}],
//    "text_offset": [int]}
// top_logprobs holds the k most likely tokens plus the chosen one (up to k + 1 entries, as
// OpenAI); text_offset is the token's offset in the choice's text, in code points (as vLLM).
// Chat:
//   {"content": [{"token": str, "logprob": num, "bytes": [int],
//                 "top_logprobs": [{"token": str, "logprob": num, "bytes": [int]}]}]}
// With echo (completions) the choice's text starts with the prompt and its logprobs with
// the prompt's tokens, the first with null logprob and top_logprobs (as OpenAI and vLLM).
// A token's text is the bytes it adds to the text ("" for a control token such as EOS); a
// logprob that is not finite is reported as -9999 (vLLM's convention: JSON has no -inf).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "engine/request.h"
#include "server/http/generation_link.h"
#include "server/http/openai_response.h"

namespace pagoda::server::http {

// The bytes token `id` adds to a text (engine's tokenizer).
using TokenBytesFn = std::function<std::string(int32_t)>;
TokenBytesFn TokenBytesOf(const engine::Engine& engine);

// One choice's logprobs: tokens delivered, given out as their text is sent.
class ChoiceLogprobs {
 public:
  ChoiceLogprobs(ApiKind kind, TokenBytesFn token_bytes);

  // Tokens the engine delivered, in order (their text may still be held back).
  void Add(const std::vector<engine::TokenLogprob>& tokens);
  // A delivery's tokens; with echo (completions), the first delivery's echoed prompt: its
  // tokens come first (the first one's logprob and top_logprobs null, text_offset from the
  // start of the prompt), given out with the prompt's text, which no later token claims.
  void Add(const SampleDelta& delta);
  // The logprobs object of the tokens whose text lies within the text sent before plus
  // `text` (sent now); with `all` (the choice ended), every token left. Null when that is no
  // token.
  nlohmann::json Take(std::string_view text, bool all);
  // About the bytes the tokens not yet given out will take in the response (what the
  // unsent-bytes cap counts of them while they wait, e.g. a whole non-streamed answer).
  int64_t held_bytes() const { return held_bytes_; }

 private:
  nlohmann::json TokenJson(const engine::TokenLogprob& lp, int64_t offset) const;

  ApiKind kind_;
  TokenBytesFn token_bytes_;
  std::deque<engine::TokenLogprob> pending_;  // delivered, not yet given out
  std::vector<nlohmann::json> prompt_;        // echoed prompt tokens not yet given out
  size_t echo_left_ = 0;                      // bytes of echoed text not yet sent
  std::string unclaimed_;                     // text sent beyond the tokens given out
  int64_t offset_ = 0;                        // code points of the text the given-out tokens cover
  int64_t held_bytes_ = 0;                    // held_bytes()
};

// choices[i].Take(text, all), or null when `choices` is empty (no logprobs requested).
nlohmann::json TakeLogprobs(std::vector<ChoiceLogprobs>& choices, size_t i, std::string_view text,
                            bool all);
// Non-streamed: every choice's logprobs for its whole text (texts[i]); empty when `choices` is.
std::vector<nlohmann::json> TakeAll(std::vector<ChoiceLogprobs>& choices,
                                    const std::vector<std::string>& texts);

}  // namespace pagoda::server::http
