// Applies sampled tokens to a sequence: appends them, streams text through the incremental
// detokenizer, and decides when the sequence is done (an end-of-generation token, stop token, stop
// string, max tokens, context length). Text at or past a stop string is never delivered, and text
// that could still become a stop string is held back until it cannot.
#pragma once

#include <optional>

#include "engine/request.h"
#include "engine/sequence.h"
#include "model/tokenizer.h"

namespace pagoda::engine {

class OutputProcessor {
 public:
  // `context_length`: a sequence never grows past this many tokens.
  OutputProcessor(const model::Tokenizer* tokenizer, int32_t context_length)
      : tokenizer_(tokenizer), context_length_(context_length) {}

  // Appends `token` to `seq` and returns what to deliver; finish_reason is set when the
  // sequence is done.
  GenerationOutput Append(Sequence* seq, int32_t token, std::optional<TokenLogprob> logprob) const;

 private:
  // Why `seq` stops after its newest token, or kNone.
  FinishReason StopReason(const Sequence& seq, int32_t token, bool* hit_stop_string) const;

  const model::Tokenizer* tokenizer_;
  int32_t context_length_;
};

}  // namespace pagoda::engine
