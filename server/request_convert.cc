#include "server/request_convert.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "server/status_details.h"

namespace pagoda::server {
namespace {

// response_format's grammar, or null when unset. InvalidArgument naming the field and what
// the compiler refused.
absl::StatusOr<std::shared_ptr<const grammar::Grammar>> ToGrammar(
    const internal::RawResponseFormat& format) {
  using Format = internal::RawResponseFormat;
  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> compiled;
  const char* field = "";
  switch (format.format_case()) {
    case Format::FORMAT_NOT_SET:
      return nullptr;
    case Format::kJsonObject:
      return grammar::JsonObjectGrammar();
    case Format::kJsonSchema:
      field = "response_format.json_schema";
      compiled = grammar::CompileJsonSchema(format.json_schema());
      break;
    case Format::kGrammar:
      field = "response_format.grammar";
      compiled = grammar::CompileGbnf(format.grammar());
      break;
  }
  if (!compiled.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", compiled.status().message()));
  }
  return compiled;
}

}  // namespace

absl::StatusOr<engine::GenerationRequest> ToEngineRequest(const internal::RawGenerateRequest& raw) {
  engine::GenerationRequest r;
  r.request_id = raw.request_id();
  r.prompt = raw.prompt();
  r.prompt_token_ids.assign(raw.prompt_token_ids().begin(), raw.prompt_token_ids().end());
  if (raw.has_max_tokens()) r.max_tokens = raw.max_tokens();
  engine::SamplingParams& s = r.sampling;
  if (raw.has_temperature()) s.temperature = raw.temperature();
  if (raw.has_top_k()) s.top_k = raw.top_k();
  if (raw.has_top_p()) s.top_p = raw.top_p();
  if (raw.has_min_p()) s.min_p = raw.min_p();
  if (raw.has_repetition_penalty()) s.repetition_penalty = raw.repetition_penalty();
  if (raw.has_presence_penalty()) s.presence_penalty = raw.presence_penalty();
  if (raw.has_frequency_penalty()) s.frequency_penalty = raw.frequency_penalty();
  if (raw.has_seed()) s.seed = raw.seed();
  if (raw.has_logprobs()) s.logprobs = raw.logprobs();
  if (raw.has_prompt_logprobs()) s.prompt_logprobs = raw.prompt_logprobs();
  // Ascending ids, whatever order the map iterates in (the engine validates the entries).
  for (const auto& [id, bias] : raw.logit_bias()) s.logit_bias.emplace_back(id, bias);
  std::sort(s.logit_bias.begin(), s.logit_bias.end());
  r.stop.assign(raw.stop().begin(), raw.stop().end());
  r.stop_token_ids.assign(raw.stop_token_ids().begin(), raw.stop_token_ids().end());
  r.ignore_eos = raw.ignore_eos();
  if (raw.has_cache_prompt()) r.cache_prompt = raw.cache_prompt();
  r.cache_salt = raw.cache_salt();
  r.parse_special = !raw.has_parse_special() || raw.parse_special();
  r.priority = raw.priority();
  if (raw.has_n()) r.n = raw.n();
  if (raw.has_response_format()) {
    absl::StatusOr<std::shared_ptr<const grammar::Grammar>> g = ToGrammar(raw.response_format());
    if (!g.ok()) return g.status();
    s.grammar = *std::move(g);
  }
  return r;
}

absl::StatusOr<engine::GenerationRequest> ParseGenerateRequest(const grpc::ByteBuffer& request,
                                                               std::string* request_id) {
  internal::RawGenerateRequest raw;
  grpc::ByteBuffer copy(request);
  grpc::ProtoBufferReader reader(&copy);
  if (!raw.ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError("request: not a valid GenerateRequest message");
  }
  *request_id = raw.request_id();
  return ToEngineRequest(raw);
}

namespace {

void ToProto(const engine::TokenLogprob& lp, v1::TokenLogprob* p) {
  p->set_token_id(lp.token_id);
  p->set_logprob(lp.logprob);
  for (const auto& [id, l] : lp.top) {
    v1::TopLogprob* t = p->add_top_logprobs();
    t->set_token_id(id);
    t->set_logprob(l);
  }
}

}  // namespace

void ToResponse(const engine::GenerationOutput& output, v1::GenerateResponse* response) {
  response->set_index(output.index);
  for (int32_t id : output.token_ids) response->add_token_ids(id);
  response->set_text(output.text);
  for (const engine::TokenLogprob& lp : output.logprobs) ToProto(lp, response->add_logprobs());
  for (int32_t id : output.prompt_token_ids) response->add_prompt_token_ids(id);
  for (const engine::TokenLogprob& lp : output.prompt_logprobs) {
    ToProto(lp, response->add_prompt_logprobs());
  }
  if (!output.sample_finished()) return;
  response->set_finish_reason(engine::FinishReasonName(output.finish_reason));
  if (!output.finished()) return;
  v1::Usage* u = response->mutable_usage();
  u->set_prompt_tokens(output.usage.prompt_tokens);
  u->set_completion_tokens(output.usage.completion_tokens);
  u->set_cached_tokens(output.usage.cached_tokens);
  u->set_queue_time_seconds(absl::ToDoubleSeconds(output.usage.queue_time));
  u->set_time_to_first_token_seconds(absl::ToDoubleSeconds(output.usage.time_to_first_token));
}

grpc::Status ToGrpcStatus(const absl::Status& status) { return ToGrpcStatusWithDetails(status); }

}  // namespace pagoda::server
