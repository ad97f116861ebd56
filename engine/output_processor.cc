#include "engine/output_processor.h"

#include <algorithm>

#include "engine/stop_strings.h"

namespace pagoda::engine {

FinishReason OutputProcessor::StopReason(const Sequence& seq, int32_t token,
                                         bool* hit_stop_string) const {
  const GenerationRequest& r = seq.request;
  if (*hit_stop_string) return FinishReason::kStop;
  if (!r.ignore_eos && tokenizer_->IsEog(token)) return FinishReason::kStop;
  if (std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) !=
      r.stop_token_ids.end()) {
    return FinishReason::kStop;
  }
  if (seq.num_tokens() >= seq.max_total_tokens || seq.num_tokens() >= context_length_) {
    return FinishReason::kLength;
  }
  return FinishReason::kNone;
}

GenerationOutput OutputProcessor::Append(Sequence* seq, int32_t token,
                                         std::optional<TokenLogprob> logprob) const {
  GenerationOutput out;
  seq->tokens.push_back(token);
  ++seq->output_counts[token];
  out.token_ids.push_back(token);
  if (logprob.has_value()) out.logprobs.push_back(std::move(*logprob));

  const size_t old_size = seq->text.size();
  seq->text += seq->detokenizer->Append(token);
  const std::vector<std::string>& stops = seq->request.stop;
  bool hit_stop_string = false;
  if (!stops.empty()) {
    const size_t pos = FindStop(seq->text, old_size, stops);
    if (pos != std::string::npos) {
      seq->text.resize(pos);
      hit_stop_string = true;
    }
  }
  out.finish_reason = StopReason(*seq, token, &hit_stop_string);
  size_t deliverable = seq->text.size();
  if (out.finished()) {
    if (!hit_stop_string) seq->text += seq->detokenizer->Flush();
    deliverable = seq->text.size();
  } else if (!stops.empty()) {
    deliverable -= HeldBack(seq->text, stops);
  }
  if (deliverable > seq->text_sent) {
    out.text = seq->text.substr(seq->text_sent, deliverable - seq->text_sent);
    seq->text_sent = deliverable;
  }
  return out;
}

}  // namespace pagoda::engine
