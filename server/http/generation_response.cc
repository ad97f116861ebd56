#include "server/http/generation_response.h"

#include <utility>

#include "absl/time/time.h"

namespace pagoda::server::http {
namespace {

using nlohmann::json;

const char* IdPrefix(ApiKind kind) {
  return kind == ApiKind::kChat ? "chatcmpl-" : kind == ApiKind::kResponses ? "resp_" : "cmpl-";
}

}  // namespace

GenerationResponse::GenerationResponse(HttpContext& context, ResponseWriter& writer, ApiKind kind,
                                       std::shared_ptr<GenerationCall> call, PreparedGeneration p)
    : context_(context),
      writer_(writer),
      kind_(kind),
      stream_(p.stream),
      include_usage_(p.include_usage),
      link_(std::move(p.link)),
      handles_(std::move(p.handles)),
      registrations_(std::move(p.registrations)),
      format_(kind, IdPrefix(kind) + p.submitted.request_id, absl::ToUnixSeconds(call->start()),
              p.model.empty() ? context.deps().model_name : p.model),
      samples_(static_cast<size_t>(p.n) * p.parts),
      call_(std::move(call)) {
  if (p.logprobs) {
    const TokenBytesFn token_bytes = TokenBytesOf(*context_.deps().engine);
    for (Sample& s : samples_) s.logprobs.emplace(kind, token_bytes);
  }
  if (p.tool_calls.has_value()) {
    format_.set_tool_calls(*p.tool_calls);
    if (stream_ || kind_ == ApiKind::kResponses) tool_calls_.emplace(*p.tool_calls, p.n);
  }
  if (p.reasoning.has_value()) {
    format_.set_reasoning(*p.reasoning);
    reasoning_ = std::move(p.reasoning);
  }
  if (kind_ == ApiKind::kResponses) {
    responses_.emplace(format_.id(), absl::ToUnixSeconds(call_->start()),
                       p.model.empty() ? context.deps().model_name : p.model,
                       std::move(p.responses));
  }
}

GenerationResponse::Parsed GenerationResponse::Parse(size_t i, const std::string& text,
                                                     bool at_end) {
  Sample& s = samples_[i];
  Parsed out;
  std::string content = text;
  if (reasoning_.has_value()) {
    if (!s.reasoning.has_value()) s.reasoning.emplace(*reasoning_, s.reasoning_open);
    chat::ReasoningStreamParser::Delta d = s.reasoning->Feed(text);
    if (at_end) {
      chat::ReasoningStreamParser::Delta rest = s.reasoning->Finish();
      d.reasoning += rest.reasoning;
      d.content += rest.content;
    }
    out.reasoning = std::move(d.reasoning);
    content = std::move(d.content);
  }
  if (tool_calls_.has_value()) {
    out.answer = tool_calls_->Next(i, content, at_end);
  } else {
    out.answer.content = std::move(content);
  }
  return out;
}

void GenerationResponse::WriteEvents(const std::vector<std::string>& events) {
  for (const std::string& e : events) writer_.WriteEvent(e);
}

void GenerationResponse::AbortAll() {
  for (const engine::RequestHandle h : handles_) context_.client().Abort(h);
}

void GenerationResponse::Start() {
  if (stream_) {
    writer_.StartEvents();
    if (kind_ == ApiKind::kChat) {
      for (size_t i = 0; i < samples_.size(); ++i) {
        writer_.WriteEvent(format_.RoleChunk(static_cast<int32_t>(i), include_usage_));
      }
    } else if (kind_ == ApiKind::kResponses) {
      WriteEvents(responses_->Open());
    }
  }
  writer_.WatchDisconnect();
  OnWake();
}

void GenerationResponse::OnWake() {
  if (done()) return;
  // Always taken, so every output wakes the connection and the unsent bytes are counted here.
  const OutputBatch batch = link_->Take();
  call_->OnTokens(batch.num_tokens, batch.token_gaps);
  if (writer_.closed() || phase_ == Phase::kCut) {
    if (batch.finished()) Finish(batch);
    return;
  }
  for (size_t i = 0; i < samples_.size() && i < batch.samples.size(); ++i) {
    Sample& s = samples_[i];
    s.held += batch.samples[i].text;
    if (batch.samples[i].reasoning_open) s.reasoning_open = true;
    if (s.logprobs.has_value()) s.logprobs->Add(batch.samples[i]);
    if (batch.samples[i].finish_reason != engine::FinishReason::kNone) {
      s.reason = batch.samples[i].finish_reason;
    }
  }
  if (batch.finished()) return Finish(batch);
  if (stream_) {
    WriteEndedSamples();
    if (!writer_.writing()) FlushText();
  }
  CutIfOverUnsentCap();
}

void GenerationResponse::OnWritesDone() {
  if (!stream_ || done() || writer_.closed()) return;
  FlushText();  // what arrived while the write was in flight, as one event
}

void GenerationResponse::OnClientGone() {
  if (phase_ != Phase::kRunning) return;
  phase_ = Phase::kClientGone;
  call_->ClientGone("the client closed the connection");
  // The engine frees the request's blocks within a step and sends its last output,
  // which unregisters it (OnWake -> Finish).
  AbortAll();
}

void GenerationResponse::FlushText() {
  for (size_t i = 0; i < samples_.size(); ++i) {
    if (samples_[i].held.empty() || samples_[i].last_event_out) continue;
    WriteText(i, /*at_end=*/false);
  }
}

void GenerationResponse::WriteText(size_t i, bool at_end) {
  Sample& s = samples_[i];
  const int32_t index = static_cast<int32_t>(i);
  const json logprobs = s.logprobs.has_value() ? s.logprobs->Take(s.held, at_end) : json(nullptr);
  if (kind_ == ApiKind::kResponses) {
    const Parsed d = Parse(i, s.held, at_end);
    WriteEvents(responses_->Add(d.reasoning, d.answer));
  } else if (!tool_calls_.has_value() && !reasoning_.has_value()) {
    writer_.WriteEvent(format_.Chunk(index, s.held, "", include_usage_, logprobs));
  } else if (const Parsed d = Parse(i, s.held, at_end);
             !d.answer.empty() || !d.reasoning.empty() || !logprobs.is_null()) {
    writer_.WriteEvent(format_.DeltaChunk(index, d.reasoning, d.answer, include_usage_, logprobs));
  }
  s.held.clear();
}

void GenerationResponse::WriteEndedSamples() {
  for (size_t i = 0; i < samples_.size(); ++i) {
    Sample& s = samples_[i];
    // An error or abort ends the whole request, reported by Finish.
    if (s.last_event_out || s.reason == engine::FinishReason::kNone ||
        s.reason == engine::FinishReason::kError || s.reason == engine::FinishReason::kAbort) {
      continue;
    }
    // The text first, then an event with no text carrying the finish reason (as OpenAI
    // and llama-server): a client that stops reading at finish_reason loses no text.
    if (!s.held.empty() || tool_calls_.has_value() || reasoning_.has_value()) {
      WriteText(i, /*at_end=*/true);
    }
    if (kind_ == ApiKind::kResponses) {  // the response's end closes its items (Finish)
      s.last_event_out = true;
      continue;
    }
    const std::string name = engine::FinishReasonName(s.reason);
    const std::string reason = tool_calls_.has_value() ? tool_calls_->FinishReason(i, name) : name;
    const json logprobs =
        s.logprobs.has_value() ? s.logprobs->Take("", /*all=*/true) : json(nullptr);
    writer_.WriteEvent(
        format_.Chunk(static_cast<int32_t>(i), "", reason, include_usage_, logprobs));
    s.last_event_out = true;
  }
}

bool GenerationResponse::CutIfOverUnsentCap() {
  const int64_t cap = context_.options().max_unsent_bytes;
  if (cap <= 0 || phase_ != Phase::kRunning || writer_.closed()) return false;
  int64_t unsent = writer_.UnsentBytes();
  for (const Sample& s : samples_) {
    unsent += static_cast<int64_t>(s.held.size());
    if (s.logprobs.has_value()) unsent += s.logprobs->held_bytes();
  }
  if (unsent <= cap) return false;
  const absl::Status cut = stream_
                               ? call_->CutAtUnsentCap(unsent, cap, "client is not reading")
                               : call_->CutAtUnsentCap(unsent, cap, "response not sent yet",
                                                       "; stream long outputs (\"stream\": true)");
  phase_ = Phase::kCut;
  for (Sample& s : samples_) s.held.clear();
  // The engine frees the request's blocks within a step; its last output unregisters it.
  AbortAll();
  writer_.CloseAfterResponse();
  if (stream_) {
    writer_.Close();  // the status line is out: an SSE stream cannot carry a status any more
  } else {
    writer_.RespondError(ToHttpError(cut));
  }
  return true;
}

void GenerationResponse::Finish(const OutputBatch& batch) {
  const bool cut = phase_ == Phase::kCut;
  phase_ = Phase::kDone;
  for (const uint64_t r : registrations_) context_.Unregister(r);
  link_->Detach();  // here, on the connection's strand (see GenerationLink)
  const bool failed = batch.finish_reason == engine::FinishReason::kError;
  call_->OnLast(batch.finish_reason, batch.error, batch.usage);
  call_->LogAccess();
  if (writer_.closed() || cut) return;  // cut at the unsent cap: its answer is already out
  if (!stream_) {
    if (failed) return writer_.RespondError(ToHttpError(batch.error));
    if (kind_ == ApiKind::kResponses) {
      const Parsed d = Parse(0, samples_[0].held, /*at_end=*/true);
      responses_->Add(d.reasoning, d.answer);
      responses_->Close(engine::FinishReasonName(samples_[0].reason), batch.usage);
      return writer_.Respond(200, "application/json", Dump(responses_->Response()));
    }
    std::vector<std::string> texts, reasons;
    std::vector<json> logprobs;
    std::vector<bool> reasoning_open;
    for (Sample& s : samples_) {
      texts.push_back(s.held);
      reasons.push_back(engine::FinishReasonName(s.reason));
      if (s.logprobs.has_value()) logprobs.push_back(s.logprobs->Take(s.held, /*all=*/true));
      reasoning_open.push_back(s.reasoning_open);
    }
    return writer_.Respond(200, "application/json",
                           format_.Full(texts, reasons, batch.usage, logprobs, reasoning_open));
  }
  if (failed) {
    writer_.CloseAfterResponse();
    const std::string body = ToHttpError(batch.error).body;
    writer_.WriteEvent(kind_ == ApiKind::kResponses ? responses_->ErrorEvent(body)
                                                    : ResponseFormatter::ErrorEvent(body));
  } else if (kind_ == ApiKind::kResponses) {
    WriteEndedSamples();
    WriteEvents(responses_->Close(engine::FinishReasonName(samples_[0].reason), batch.usage));
  } else {
    WriteEndedSamples();
    if (include_usage_) writer_.WriteEvent(format_.UsageChunk(batch.usage));
    writer_.WriteEvent(ResponseFormatter::Done());
  }
  writer_.EndEvents();  // may end the response: nothing here after it
}

}  // namespace pagoda::server::http
