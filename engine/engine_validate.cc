// Engine::Validate and its parts: every check of a GenerationRequest against the model and
// the engine's limits, and the prompt tokenized (Submit calls it off the engine thread).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine/request_validation.h"
#include "engine/sampler.h"
#include "model/tokenizer.h"
#include "model/utf8.h"

namespace pagoda::engine {

absl::StatusOr<std::string> Engine::RenderChat(const std::vector<ChatMessage>& messages,
                                               bool add_generation_prompt,
                                               const nlohmann::ordered_json* tools,
                                               const nlohmann::json* kwargs) const {
  ASSIGN_OR_RETURN(ChatPromptText out, RenderChecked(*chat_, messages, tools, kwargs,
                                                     add_generation_prompt, max_prompt_bytes_));
  return std::move(out.text);
}

std::string_view Engine::chat_template_source() const { return chat_->source(); }

absl::Status Engine::ValidateStops(const GenerationRequest& r, int32_t vocab) const {
  if (static_cast<int64_t>(r.stop.size()) > config_.max_stop_strings) {
    return Invalid("stop", absl::StrCat(r.stop.size(), " stop strings; at most ",
                                        config_.max_stop_strings, " (max_stop_strings)"));
  }
  for (size_t i = 0; i < r.stop.size(); ++i) {
    const std::string& s = r.stop[i];
    const std::string field = absl::StrCat("stop[", i, "]");
    if (s.empty()) return Invalid(field, "stop strings must not be empty");
    if (static_cast<int64_t>(s.size()) > config_.max_stop_string_bytes) {
      return Invalid(
          field, absl::StrCat("has ", s.size(), " bytes; at most ", config_.max_stop_string_bytes,
                              " (max_stop_string_bytes)"));
    }
    if (!model::IsValidUtf8(s)) return Invalid(field, "is not valid UTF-8");
  }
  for (int32_t id : r.stop_token_ids) {
    if (id < 0 || id >= vocab)
      return Invalid("stop_token_ids", absl::StrCat(id, " is outside the vocabulary"));
  }
  return absl::OkStatus();
}

absl::Status Engine::EncodePrompt(const GenerationRequest& r, std::vector<int32_t>* prompt) const {
  const model::Tokenizer& tok = core_->tokenizer();
  const int32_t vocab = tok.vocab_size();
  if (!r.messages.empty()) {
    if (!r.prompt.empty() || !r.prompt_token_ids.empty()) {
      return Invalid("messages", "give either messages or a prompt, not both");
    }
    ASSIGN_OR_RETURN(
        const ChatPromptText chat,
        RenderChecked(*chat_, r.messages, r.chat_tools.get(), r.chat_template_kwargs.get(),
                      r.add_generation_prompt, max_prompt_bytes_));
    if (static_cast<int64_t>(chat.text.size()) > max_prompt_bytes_) {
      return Invalid("messages", absl::StrCat("render to ", chat.text.size(), " bytes; at most ",
                                              max_prompt_bytes_, " (max_prompt_bytes)"));
    }
    ASSIGN_OR_RETURN(*prompt, EncodeChatPrompt(tok, r.messages, chat, r.chat_content_special));
  } else if (!r.prompt_token_ids.empty()) {
    for (size_t i = 0; i < r.prompt_token_ids.size(); ++i) {
      const int32_t id = r.prompt_token_ids[i];
      if (id < 0 || id >= vocab) {
        return Invalid("prompt_token_ids",
                       absl::StrCat("token ", id, " at index ", i, " is outside [0, ", vocab, ")"));
      }
    }
    *prompt = r.prompt_token_ids;
  } else {
    if (r.prompt.empty()) return Invalid("prompt", "is empty");
    if (static_cast<int64_t>(r.prompt.size()) > max_prompt_bytes_) {
      return Invalid("prompt", absl::StrCat("has ", r.prompt.size(), " bytes; at most ",
                                            max_prompt_bytes_, " are accepted (max_prompt_bytes)"));
    }
    if (!model::IsValidUtf8(r.prompt)) return Invalid("prompt", "is not valid UTF-8");
    *prompt = tok.Encode(r.prompt, tok.add_bos(), r.parse_special);
  }
  return absl::OkStatus();
}

absl::Status Engine::Validate(const GenerationRequest& r, const KvLimit& limit,
                              std::vector<int32_t>* prompt, int32_t* max_total_tokens) const {
  const int32_t vocab = core_->tokenizer().vocab_size();
  const int32_t context = core_->model_config().context_length;
  // Cheap checks first: nothing is tokenized for a request they reject.
  RETURN_IF_ERROR(ValidateRequestId(r.request_id));
  if (r.cache_salt.size() > kMaxCacheSaltBytes) {
    return Invalid("cache_salt", absl::StrCat("has ", r.cache_salt.size(), " bytes; at most ",
                                              kMaxCacheSaltBytes));
  }
  if (!r.prompt.empty() && !r.prompt_token_ids.empty()) {
    return Invalid("prompt", "give either prompt or prompt_token_ids, not both");
  }
  RETURN_IF_ERROR(ValidateSampling(r.sampling));
  RETURN_IF_ERROR(ValidateLogitBias(r.sampling.logit_bias, vocab));
  if (r.n < 1 || r.n > 16) return Invalid("n", "must be in [1, 16]");
  RETURN_IF_ERROR(ValidateStops(r, vocab));
  if (r.prompt_token_ids.size() >= static_cast<size_t>(context)) {
    return Invalid("prompt_token_ids", absl::StrCat("has ", r.prompt_token_ids.size(),
                                                    " tokens; the context length is ", context));
  }
  RETURN_IF_ERROR(EncodePrompt(r, prompt));
  const int32_t n = static_cast<int32_t>(prompt->size());
  if (n >= context) {
    return Invalid("prompt", absl::StrCat("has ", n, " tokens; the context length is ", context,
                                          " and at least one token must be generated"));
  }
  const int64_t capacity = limit.tokens;
  if (r.max_tokens.has_value()) {
    // 0 computes the prompt for its logprobs only.
    if (*r.max_tokens < 0 || (*r.max_tokens == 0 && !r.sampling.prompt_logprobs.has_value())) {
      return Invalid("max_tokens", "must be positive (0 only with prompt_logprobs)");
    }
    if (int64_t{n} + *r.max_tokens > context) {
      return Invalid("max_tokens",
                     absl::StrCat("prompt (", n, " tokens) + max_tokens (", *r.max_tokens,
                                  ") exceeds the context length ", context));
    }
    *max_total_tokens = n + *r.max_tokens;
  } else {
    *max_total_tokens = static_cast<int32_t>(std::min<int64_t>(context, capacity));
  }
  if (*max_total_tokens > capacity || n >= capacity) {
    return absl::ResourceExhaustedError(absl::StrCat("request needs ", *max_total_tokens,
                                                     " tokens of KV cache; ", limit.holder,
                                                     " holds ", capacity));
  }
  return absl::OkStatus();
}

}  // namespace pagoda::engine
