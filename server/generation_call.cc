#include "server/generation_call.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/access_log.h"
#include "server/admission.h"
#include "spdlog/spdlog.h"

namespace pagoda::server {

std::vector<double> TokenGaps(int64_t n, absl::Time now, absl::Time* last) {
  std::vector<double> gaps;
  if (n <= 0) return gaps;
  if (*last != absl::InfinitePast()) {
    gaps.assign(static_cast<size_t>(n),
                absl::ToDoubleSeconds(now - *last) / static_cast<double>(n));
  }
  *last = now;
  return gaps;
}

GenerationCall::GenerationCall(Door door, ServerMetrics* metrics, absl::Time start)
    : door_(door),
      metrics_(metrics),
      start_(start),
      tokens_(std::make_unique<TokenReservation>(nullptr, "")),
      tenant_metrics_(&metrics->ForTenant("")) {}

GenerationCall::~GenerationCall() { LogAccess(); }

absl::Status GenerationCall::Admit(const absl::StatusOr<Caller>& caller) {
  if (caller.ok()) {
    tenant_ = caller->tenant->engine.name;
    tenant_metrics_ = &metrics_->ForTenant(tenant_);
    tokens_ = std::make_unique<TokenReservation>(caller->bucket, tenant_);
  }
  absl::Status admitted = AdmitCaller(caller);
  if (!admitted.ok()) Fail(admitted);
  return admitted;
}

void GenerationCall::Accepted(const engine::SubmitResult& submitted) {
  accepted_ = true;
  request_id_ = submitted.request_id;
  prompt_tokens_ = submitted.prompt_tokens;
  tokens_->Use(submitted.prompt_tokens);
  tenant_metrics_->prompt_tokens.fetch_add(submitted.prompt_tokens);
}

void GenerationCall::OnTokens(int64_t n, absl::Span<const double> gaps) {
  if (n <= 0) return;
  tokens_->Use(n);
  completion_tokens_ += static_cast<int32_t>(n);
  tenant_metrics_->generation_tokens.fetch_add(n);
  for (const double gap : gaps) tenant_metrics_->inter_token_latency.Observe(gap);
}

void GenerationCall::OnLast(engine::FinishReason reason, const absl::Status& error,
                            const engine::Usage& usage) {
  engine_done_ = true;
  tokens_->Settle();
  finish_reason_ = reason;
  usage_ = usage;
  if (ended()) return;  // refused, cut or cancelled before: counted then
  if (reason == engine::FinishReason::kError) return Fail(error);
  End(absl::OkStatus());
  TenantMetrics& m = *tenant_metrics_;
  m.request_success.Inc(engine::FinishReasonName(reason));
  m.e2e_request_latency.Observe(absl::ToDoubleSeconds(end_time_ - start_));
  m.request_queue_time.Observe(absl::ToDoubleSeconds(usage.queue_time));
  if (usage.completion_tokens > 0) {
    m.time_to_first_token.Observe(absl::ToDoubleSeconds(usage.time_to_first_token));
  }
}

void GenerationCall::Fail(absl::Status status) {
  if (ended()) return;
  tenant_metrics_->request_failure.Inc(absl::StatusCodeToString(status.code()));
  End(std::move(status));
}

bool GenerationCall::ClientGone(absl::string_view why) {
  if (ended()) return false;
  End(absl::CancelledError(why));
  if (engine_done_) return false;
  tenant_metrics_->requests_cancelled.fetch_add(1);
  spdlog::debug("{}[{}] {}", door_ == Door::kHttp ? "http " : "", QuoteLogValue(request_id_),
                std::string(why));
  return accepted_;
}

absl::Status GenerationCall::CutAtUnsentCap(int64_t unsent, int64_t cap, absl::string_view what,
                                            absl::string_view hint) {
  absl::Status status = absl::ResourceExhaustedError(
      absl::StrCat(what, ": ", unsent, " bytes of output unsent exceed ", cap,
                   " (max_unsent_bytes_per_stream)", hint));
  spdlog::warn("{}[{}] aborted: {}", door_ == Door::kHttp ? "http " : "",
               QuoteLogValue(request_id_), std::string(status.message()));
  if (!ended()) tenant_metrics_->requests_unsent_limit.fetch_add(1);
  Fail(status);
  return status;
}

void GenerationCall::End(absl::Status status) {
  status_ = std::move(status);
  end_time_ = absl::Now();
}

void GenerationCall::LogAccess() {
  if (logged_) return;
  logged_ = true;
  // Dropped before any verdict (its connection or the server went away first).
  if (!ended()) End(absl::CancelledError("the call was dropped before it ended"));
  const absl::Status final_status = status();
  const std::string code = absl::StatusCodeToString(final_status.code());
  AccessLogEntry e{
      .tenant = tenant_,
      .request_id = request_id_,
      .status = code,
      .finish_reason = engine::FinishReasonName(finish_reason_),
      .error = final_status.message(),
      .prompt_tokens = prompt_tokens_,
      .completion_tokens = completion_tokens_,
      .e2e = (end_time_ == absl::InfinitePast() ? absl::Now() : end_time_) - start_};
  if (usage_.has_value()) {
    e.cached_tokens = usage_->cached_tokens;
    e.queue_time = usage_->queue_time;
    if (usage_->completion_tokens > 0) e.time_to_first_token = usage_->time_to_first_token;
  }
  spdlog::info("{}{}", door_ == Door::kHttp ? "http " : "", FormatAccessLog(e));
}

}  // namespace pagoda::server
