#include "server/http/generation_prep.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_limits.h"
#include "server/http/openai_request.h"
#include "server/http/responses_request.h"

namespace pagoda::server::http {

absl::StatusOr<nlohmann::json> ParseJsonBody(const std::string& body) {
  if (absl::Status limits = CheckJsonLimits(body); !limits.ok()) return limits;
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return absl::InvalidArgumentError("body: not valid JSON");
  return parsed;
}

absl::StatusOr<std::string> AnswerJsonRoute(const engine::Engine& engine, const JsonRoute& route,
                                            const std::string& body, TokenBucket* bucket) {
  try {
    absl::StatusOr<nlohmann::json> parsed = ParseJsonBody(body);
    if (!parsed.ok()) return parsed.status();
    absl::StatusOr<std::string> out = route(engine, *parsed);
    if (out.ok() && bucket != nullptr) bucket->Charge((static_cast<int64_t>(out->size()) + 3) / 4);
    return out;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory while answering this request");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("answering the request failed: ", e.what()));
  }
}

namespace {

PreparedGeneration Prepare(HttpContext& context, ApiKind kind, const Caller& caller,
                           const std::string& body, std::function<void()> wake,
                           TokenReservation* tokens, PreparedGeneration& p) {
  auto refuse = [&p](absl::Status status, std::optional<HttpError> answer = std::nullopt) {
    p.answer = answer.has_value() ? *std::move(answer) : ToHttpError(status);
    p.refused = std::move(status);
    return std::move(p);
  };
  absl::StatusOr<nlohmann::json> json = ParseJsonBody(body);
  if (!json.ok()) return refuse(json.status());
  absl::StatusOr<OpenAiRequest> parsed =
      kind == ApiKind::kChat        ? ParseChatCompletionRequest(*json, body)
      : kind == ApiKind::kResponses ? ParseResponsesRequest(*json, body)
                                    : ParseCompletionRequest(*json, body);
  if (!parsed.ok()) return refuse(parsed.status());
  const std::string& served = context.deps().model_name;
  if (!parsed->model.empty() && parsed->model != served) {
    const std::string message = absl::StrCat(
        "model \"", parsed->model, "\" does not exist; this server serves \"", served, "\"");
    return refuse(absl::NotFoundError(message),
                  MakeHttpError(404, message, "invalid_request_error", "model_not_found"));
  }
  if (parsed->tools.has_value()) {
    absl::StatusOr<std::optional<ToolCallParsing>> parsing =
        ApplyChatTools(*parsed->tools, context.deps().engine->tool_call_format(),
                       context.deps().engine->max_prompt_bytes(), &parsed->request);
    if (!parsing.ok()) return refuse(parsing.status());
    p.tool_calls = *parsing;
  }
  if (const ReasoningOptions& reasoning = context.deps().reasoning;
      kind != ApiKind::kCompletion && reasoning.format.has_value()) {
    const chat::ReasoningFormat& f = *reasoning.format;
    parsed->request.reasoning = {.open = f.open,
                                 .close = f.close,
                                 .starts_open = f.starts_open,
                                 .max_tokens = parsed->reasoning_budget.has_value()
                                                   ? parsed->reasoning_budget
                                                   : reasoning.budget};
    p.reasoning = f;
  }
  p.responses = std::move(parsed->responses);
  p.model = parsed->model;
  p.stream = parsed->stream;
  p.include_usage = parsed->stream && parsed->include_usage;
  p.n = std::max(parsed->request.n, 1);
  p.logprobs = parsed->request.sampling.logprobs.has_value();
  parsed->request.tenant = caller.tenant->engine.name;  // never from the body
  parsed->request.admit = tokens->AdmitHook();
  // One engine request per prompt (a prompt array's: each validated and admitted on its
  // own, its tokens reserved on its own), their choices in one link.
  std::vector<engine::GenerationRequest> parts;
  for (PromptInput& more : parsed->more_prompts) {
    engine::GenerationRequest r = parsed->request;
    r.prompt = std::move(more.text);
    r.prompt_token_ids = std::move(more.token_ids);
    if (!r.request_id.empty()) r.request_id += absl::StrCat("-", parts.size() + 1);
    parts.push_back(std::move(r));
  }
  parts.insert(parts.begin(), std::move(parsed->request));
  p.parts = static_cast<int32_t>(parts.size());
  p.link = std::make_shared<GenerationLink>(p.n, std::move(wake), p.parts);
  if (parsed->echo) {
    for (int32_t k = 0; k < p.parts; ++k) {
      // The prompt as sent; token ids as the engine's tokenizer spells them.
      if (parts[k].prompt_token_ids.empty()) {
        p.link->set_echo(k, parts[k].prompt);
      } else {
        // Ids outside the vocabulary: Submit refuses them, naming the field.
        absl::StatusOr<std::string> text =
            context.deps().engine->Detokenize(parts[k].prompt_token_ids);
        if (text.ok()) p.link->set_echo(k, *std::move(text));
      }
    }
  }
  // Undoes the parts submitted so far: a request is accepted whole or not at all.
  auto withdraw = [&](absl::Status status) {
    p.link->Detach();
    for (const engine::RequestHandle h : p.handles) context.client().Abort(h);
    p.handles.clear();
    p.link.reset();
    tokens->Settle();
    return refuse(std::move(status));
  };
  for (int32_t k = 0; k < p.parts; ++k) {
    absl::StatusOr<engine::SubmitResult> submitted =
        context.client().Submit(std::move(parts[k]), GenerationLink::PartSink(p.link, k));
    if (!submitted.ok()) {
      absl::Status status = submitted.status();
      if (p.parts > 1) {  // name the prompt, keeping the type (the code the client gets)
        status = absl::Status(status.code(), absl::StrCat("prompt[", k, "]: ", status.message()));
      }
      return withdraw(std::move(status));
    }
    p.handles.push_back(submitted->handle);
    if (k == 0) {
      p.submitted = *std::move(submitted);
    } else {
      p.submitted.prompt_tokens += submitted->prompt_tokens;
    }
  }
  // Registered here, not on the strand: shutdown then cuts them even if the strand never
  // runs.
  for (const engine::RequestHandle h : p.handles) {
    const std::optional<uint64_t> id = context.Register(p.link, h);
    if (!id.has_value()) {
      for (const uint64_t r : p.registrations) context.Unregister(r);
      p.registrations.clear();
      return withdraw(absl::UnavailableError("the server is shutting down"));
    }
    p.registrations.push_back(*id);
  }
  return std::move(p);
}

}  // namespace

PreparedGeneration PrepareGeneration(HttpContext& context, ApiKind kind, const Caller& caller,
                                     const std::string& body, std::function<void()> wake,
                                     TokenReservation* tokens) {
  PreparedGeneration p;
  // Whatever parsing, a grammar or a template throws ends this request with an error, never
  // the preparation thread.
  absl::Status failed;
  try {
    return Prepare(context, kind, caller, body, std::move(wake), tokens, p);
  } catch (const std::bad_alloc&) {
    failed = absl::ResourceExhaustedError("out of memory while preparing this request");
  } catch (const std::exception& e) {
    failed = absl::InternalError(absl::StrCat("preparing the request failed: ", e.what()));
  }
  if (p.link != nullptr) {  // submitted before it threw: no engine request is left behind
    p.link->Detach();
    for (const uint64_t r : p.registrations) context.Unregister(r);
    for (const engine::RequestHandle h : p.handles) context.client().Abort(h);
  }
  tokens->Settle();
  PreparedGeneration refused;
  refused.answer = ToHttpError(failed);
  refused.refused = std::move(failed);
  return refused;
}

}  // namespace pagoda::server::http
