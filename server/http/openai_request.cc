#include "server/http/openai_request.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/http/response_format.h"

namespace pagoda::server::http {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// The field, or null when absent or JSON null.
const json* Field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<double>> Number(const json& body, const char* key) {
  const json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return Bad(key, "must be a number");
  return v->get<double>();
}

absl::StatusOr<std::optional<int64_t>> Integer(const json& body, const char* key) {
  const json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (d != static_cast<double>(static_cast<int64_t>(d))) return Bad(key, "must be an integer");
    return static_cast<int64_t>(d);
  }
  if (v->is_number_unsigned() && v->get<uint64_t>() > std::numeric_limits<int64_t>::max()) {
    return Bad(key, "is too large");
  }
  if (!v->is_number_integer()) return Bad(key, "must be an integer");
  return v->get<int64_t>();
}

absl::StatusOr<std::optional<int32_t>> Int32(const json& body, const char* key) {
  absl::StatusOr<std::optional<int64_t>> v = Integer(body, key);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return std::nullopt;
  if (**v < std::numeric_limits<int32_t>::min() || **v > std::numeric_limits<int32_t>::max()) {
    return Bad(key, "is out of range");
  }
  return static_cast<int32_t>(**v);
}

absl::StatusOr<std::optional<bool>> Bool(const json& body, const char* key) {
  const json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return Bad(key, "must be true or false");
  return v->get<bool>();
}

// Token ids: a JSON array of integers that fit int32 (range checks are the engine's).
absl::StatusOr<std::vector<int32_t>> TokenIds(const json& v, const std::string& field) {
  std::vector<int32_t> ids;
  for (const json& id : v) {
    if (!id.is_number_integer()) return Bad(field, "must be an array of integers");
    const int64_t x = id.get<int64_t>();
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max()) {
      return Bad(field, absl::StrCat(x, " is out of range"));
    }
    ids.push_back(static_cast<int32_t>(x));
  }
  return ids;
}

#define PAGODA_ASSIGN(lhs, expr)                  \
  do {                                            \
    auto value_or = (expr);                       \
    if (!value_or.ok()) return value_or.status(); \
    lhs = *std::move(value_or);                   \
  } while (0)

// A feature the engine does not have: refused unless absent, null or the neutral value.
absl::Status Unsupported(const json& body, const char* key, const json& neutral) {
  const json* v = Field(body, key);
  if (v == nullptr || *v == neutral) return absl::OkStatus();
  if (v->is_array() && v->empty()) return absl::OkStatus();
  if (v->is_object() && v->empty()) return absl::OkStatus();
  return Bad(key, "is not supported by this server");
}

// "logit_bias": {"<token id>": bias, ...}, ascending ids (range checks are the engine's).
absl::StatusOr<std::vector<std::pair<int32_t, float>>> LogitBias(const json& v) {
  if (!v.is_object()) return Bad("logit_bias", "must be an object of token id -> bias");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, bias] : v.items()) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(key, &id)) {
      return Bad("logit_bias", absl::StrCat("key \"", key, "\" is not a token id"));
    }
    if (!bias.is_number()) {
      return Bad("logit_bias", absl::StrCat("the bias of token ", key, " must be a number"));
    }
    out.emplace_back(id, static_cast<float>(bias.get<double>()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The fields both endpoints share.
absl::Status ParseCommon(const json& body, OpenAiRequest* out) {
  if (!body.is_object()) return Bad("body", "must be a JSON object");
  engine::GenerationRequest& r = out->request;
  if (const json* m = Field(body, "model")) {
    if (!m->is_string()) return Bad("model", "must be a string");
    out->model = m->get<std::string>();
  }
  std::optional<double> d;
  PAGODA_ASSIGN(d, Number(body, "temperature"));
  if (d) {
    // OpenAI's range (gRPC takes any finite value >= 0).
    if (!(*d >= 0 && *d <= 2)) return Bad("temperature", "must be in [0, 2]");
    r.sampling.temperature = static_cast<float>(*d);
  }
  PAGODA_ASSIGN(d, Number(body, "top_p"));
  if (d) r.sampling.top_p = static_cast<float>(*d);
  PAGODA_ASSIGN(d, Number(body, "min_p"));
  if (d) r.sampling.min_p = static_cast<float>(*d);
  PAGODA_ASSIGN(d, Number(body, "presence_penalty"));
  if (d) r.sampling.presence_penalty = static_cast<float>(*d);
  PAGODA_ASSIGN(d, Number(body, "frequency_penalty"));
  if (d) r.sampling.frequency_penalty = static_cast<float>(*d);
  PAGODA_ASSIGN(d, Number(body, "repetition_penalty"));
  if (d) r.sampling.repetition_penalty = static_cast<float>(*d);
  std::optional<int32_t> i;
  PAGODA_ASSIGN(i, Int32(body, "top_k"));
  if (i) r.sampling.top_k = *i < 0 ? 0 : *i;  // OpenAI-style servers use -1 for off
  PAGODA_ASSIGN(i, Int32(body, "priority"));
  if (i) r.priority = *i;
  PAGODA_ASSIGN(i, Int32(body, "n"));
  if (i) r.n = *i;  // the engine checks the range (1..16), as for gRPC
  std::optional<int64_t> seed;
  PAGODA_ASSIGN(seed, Integer(body, "seed"));
  if (seed) r.sampling.seed = static_cast<uint64_t>(*seed);
  std::optional<bool> b;
  PAGODA_ASSIGN(b, Bool(body, "ignore_eos"));
  if (b) r.ignore_eos = *b;
  PAGODA_ASSIGN(b, Bool(body, "cache_prompt"));  // llama.cpp's
  if (b) r.cache_prompt = *b;
  if (const json* salt = Field(body, "cache_salt")) {  // vLLM's
    if (!salt->is_string()) return Bad("cache_salt", "must be a string");
    r.cache_salt = salt->get<std::string>();  // the engine checks its length
  }
  PAGODA_ASSIGN(b, Bool(body, "stream"));
  out->stream = b.value_or(false);
  if (const json* so = Field(body, "stream_options")) {
    if (!so->is_object()) return Bad("stream_options", "must be an object");
    PAGODA_ASSIGN(b, Bool(*so, "include_usage"));
    out->include_usage = b.value_or(false);
  }
  if (const json* stop = Field(body, "stop")) {
    if (stop->is_string()) {
      r.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const json& s : *stop) {
        if (!s.is_string()) return Bad("stop", "must be a string or an array of strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      return Bad("stop", "must be a string or an array of strings");
    }
  }
  if (const json* ids = Field(body, "stop_token_ids")) {
    if (!ids->is_array()) return Bad("stop_token_ids", "must be an array of integers");
    PAGODA_ASSIGN(r.stop_token_ids, TokenIds(*ids, "stop_token_ids"));
  }
  if (const json* bias = Field(body, "logit_bias")) {
    PAGODA_ASSIGN(r.sampling.logit_bias, LogitBias(*bias));
  }
  if (absl::Status s = Unsupported(body, "functions", json::object()); !s.ok()) return s;
  if (absl::Status s = Unsupported(body, "best_of", 1); !s.ok()) return s;
  return absl::OkStatus();
}

// Sets max_tokens from `key` when present.
absl::Status MaxTokens(const json& body, const char* key, engine::GenerationRequest* r) {
  std::optional<int32_t> n;
  PAGODA_ASSIGN(n, Int32(body, key));
  if (n) r->max_tokens = *n;
  return absl::OkStatus();
}

// One prompt of an array: a string or a non-empty array of token ids.
absl::StatusOr<PromptInput> OnePrompt(const json& p, const std::string& field) {
  if (p.is_string()) return PromptInput{.text = p.get<std::string>()};
  if (p.is_array() && !p.empty()) {
    PromptInput out;
    PAGODA_ASSIGN(out.token_ids, TokenIds(p, field));
    return out;
  }
  return Bad(field, "must be a string or a non-empty array of token ids");
}

// "prompt": a string, an array of token ids, or an array of prompts (strings or arrays of
// token ids, at most kMaxPromptsPerRequest): the first goes into `r`, the others into
// `more`.
absl::Status ParsePrompt(const json& body, engine::GenerationRequest* r,
                         std::vector<PromptInput>* more) {
  const json* p = Field(body, "prompt");
  if (p == nullptr) return Bad("prompt", "is required");
  if (p->is_string()) {
    r->prompt = p->get<std::string>();
    return absl::OkStatus();
  }
  if (!p->is_array() || p->empty()) {
    return Bad("prompt", "must be a string, an array of token ids, or an array of those");
  }
  if ((*p)[0].is_number_integer()) {
    PAGODA_ASSIGN(r->prompt_token_ids, TokenIds(*p, "prompt"));
    return absl::OkStatus();
  }
  if (p->size() > kMaxPromptsPerRequest) {
    return Bad("prompt", absl::StrCat(p->size(), " prompts; at most ", kMaxPromptsPerRequest,
                                      " per request"));
  }
  for (size_t i = 0; i < p->size(); ++i) {
    PromptInput one;
    PAGODA_ASSIGN(one, OnePrompt((*p)[i], absl::StrCat("prompt[", i, "]")));
    if (i == 0) {
      r->prompt = std::move(one.text);
      r->prompt_token_ids = std::move(one.token_ids);
    } else {
      more->push_back(std::move(one));
    }
  }
  return absl::OkStatus();
}

// Chat's "logprobs": true with "top_logprobs": k in [0, 20] (named here: the engine's
// message would name "logprobs"); top_logprobs without logprobs is refused, as OpenAI does.
absl::Status ChatLogprobs(const json& body, engine::SamplingParams* s) {
  std::optional<bool> on;
  PAGODA_ASSIGN(on, Bool(body, "logprobs"));
  std::optional<int32_t> k;
  PAGODA_ASSIGN(k, Int32(body, "top_logprobs"));
  if (!on.value_or(false)) {
    if (k) return Bad("top_logprobs", "needs \"logprobs\": true");
    return absl::OkStatus();
  }
  if (k && (*k < 0 || *k > 20)) return Bad("top_logprobs", "must be in [0, 20]");
  s->logprobs = k.value_or(0);
  return absl::OkStatus();
}

// Chat's template variables and reasoning controls.
absl::Status ParseReasoningFields(const json& body, OpenAiRequest* out) {
  json kwargs = json::object();
  if (const json* k = Field(body, "chat_template_kwargs")) {
    if (!k->is_object()) return Bad("chat_template_kwargs", "must be an object");
    kwargs = *k;
  }
  if (const json* effort = Field(body, "reasoning_effort")) {
    if (!effort->is_string() || effort->get_ref<const std::string&>().size() > 32) {
      return Bad("reasoning_effort", "must be a string (low, medium, high, ...)");
    }
    if (!kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = *effort;
  }
  if (!kwargs.empty()) {
    out->request.chat_template_kwargs = std::make_shared<const json>(std::move(kwargs));
  }
  std::optional<int32_t> budget;
  PAGODA_ASSIGN(budget, Int32(body, "thinking_token_budget"));
  if (budget.has_value() && *budget < -1) {
    return Bad("thinking_token_budget", "must be >= 0 (-1: no budget)");
  }
  if (budget.has_value() && *budget >= 0) out->reasoning_budget = *budget;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(const json& body, std::string_view body_text) {
  OpenAiRequest out;
  if (absl::Status s = ParseCommon(body, &out); !s.ok()) return s;
  if (absl::Status s = ParsePrompt(body, &out.request, &out.more_prompts); !s.ok()) return s;
  out.request.max_tokens = 16;  // OpenAI's default for completions
  if (absl::Status s = MaxTokens(body, "max_tokens", &out.request); !s.ok()) return s;
  if (absl::Status s = Unsupported(body, "suffix", ""); !s.ok()) return s;
  if (absl::Status s = Unsupported(body, "tools", json::object()); !s.ok()) return s;
  // An integer: the chosen token's logprob and the k most likely (the engine checks k).
  std::optional<int32_t> k;
  PAGODA_ASSIGN(k, Int32(body, "logprobs"));
  if (k) out.request.sampling.logprobs = *k;
  if (absl::Status s = ParseResponseFormat(body, body_text, &out.request.sampling); !s.ok())
    return s;
  std::optional<bool> echo;
  PAGODA_ASSIGN(echo, Bool(body, "echo"));
  out.echo = echo.value_or(false);
  // Echo with logprobs covers the prompt's tokens too; max_tokens 0 scores the prompt only
  // (lm-evaluation-harness's log-likelihood requests), which the engine takes only with
  // prompt logprobs.
  if (out.echo && (k || out.request.max_tokens == 0)) {
    out.request.sampling.prompt_logprobs = k.value_or(0);
  }
  return out;
}

absl::StatusOr<OpenAiRequest> ParseChatCompletionRequest(const json& body,
                                                         std::string_view body_text) {
  OpenAiRequest out;
  if (absl::Status s = ParseCommon(body, &out); !s.ok()) return s;
  PAGODA_ASSIGN(out.request.messages, ParseMessages(body));
  if (absl::Status s = MaxTokens(body, "max_tokens", &out.request); !s.ok()) return s;
  if (absl::Status s = MaxTokens(body, "max_completion_tokens", &out.request); !s.ok()) return s;
  std::optional<bool> b;
  PAGODA_ASSIGN(b, Bool(body, "add_generation_prompt"));
  out.request.add_generation_prompt = b.value_or(true);
  if (absl::Status s = ChatLogprobs(body, &out.request.sampling); !s.ok()) return s;
  if (absl::Status s = ParseResponseFormat(body, body_text, &out.request.sampling); !s.ok())
    return s;
  PAGODA_ASSIGN(out.tools, ParseChatTools(body));
  if (absl::Status s = ParseReasoningFields(body, &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<engine::ChatMessage>> ParseMessages(const json& body) {
  if (!body.is_object()) return Bad("body", "must be a JSON object");
  const json* list = Field(body, "messages");
  if (list == nullptr) return Bad("messages", "is required");
  if (!list->is_array() || list->empty()) return Bad("messages", "must be a non-empty array");
  std::vector<engine::ChatMessage> messages;
  for (size_t k = 0; k < list->size(); ++k) {
    const json& m = (*list)[k];
    const std::string field = absl::StrCat("messages[", k, "]");
    if (!m.is_object()) return Bad(field, "must be an object");
    const json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) return Bad(field + ".role", "must be a string");
    engine::ChatMessage out{.role = role->get<std::string>()};
    const json* content = Field(m, "content");
    if (content == nullptr) {
      // An assistant turn with tool calls only has no content.
    } else if (content->is_string()) {
      out.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json& part : *content) {
        const json* type = part.is_object() ? Field(part, "type") : nullptr;
        const json* text = part.is_object() ? Field(part, "text") : nullptr;
        if (type == nullptr || *type != "text" || text == nullptr || !text->is_string()) {
          return Bad(field + ".content", "only parts of type \"text\" are supported");
        }
        if (!out.content.empty()) out.content += '\n';
        out.content += text->get<std::string>();
      }
    } else {
      return Bad(field + ".content", "must be a string, null or an array of text parts");
    }
    if (absl::Status s = ParseMessageToolFields(m, field, &out); !s.ok()) return s;
    for (const char* key : {"reasoning_content", "reasoning"}) {
      const json* reasoning = Field(m, key);
      if (reasoning == nullptr) continue;
      if (!reasoning->is_string()) return Bad(absl::StrCat(field, ".", key), "must be a string");
      if (out.reasoning_content.empty()) out.reasoning_content = reasoning->get<std::string>();
    }
    messages.push_back(std::move(out));
  }
  return messages;
}

}  // namespace pagoda::server::http
