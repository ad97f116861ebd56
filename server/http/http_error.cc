#include "server/http/http_error.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "server/status_details.h"

namespace pagoda::server::http {

HttpError MakeHttpError(int status, const std::string& message, const std::string& type,
                        const std::string& code) {
  nlohmann::json body = {{"error", {{"message", message}, {"type", type}, {"param", nullptr}}}};
  body["error"]["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {.status = status,
          .body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

bool IsContextLengthExceeded(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return false;
  const absl::string_view message = status.message();
  if (!absl::StrContains(message, "context length")) return false;
  for (absl::string_view field : {"prompt: ", "prompt_token_ids: ", "max_tokens: "}) {
    if (absl::StartsWith(message, field)) return true;
  }
  return false;
}

HttpError ToHttpError(const absl::Status& status) {
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return MakeHttpError(
          400, message, "invalid_request_error",
          IsContextLengthExceeded(status) ? "context_length_exceeded" : "invalid_request");
    case absl::StatusCode::kUnauthenticated:
      return MakeHttpError(401, message, "authentication_error", "invalid_api_key");
    case absl::StatusCode::kPermissionDenied:
      return MakeHttpError(403, message, "permission_error", "permission_denied");
    case absl::StatusCode::kNotFound:
      return MakeHttpError(404, message, "not_found_error", "not_found");
    case absl::StatusCode::kResourceExhausted: {
      HttpError e = MakeHttpError(429, message, "rate_limit_error", "rate_limit_exceeded");
      const absl::Duration delay = RetryDelayOf(status).value_or(kDefaultRetryDelay);
      e.retry_after_s = static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(delay)));
      if (*e.retry_after_s < 1) e.retry_after_s = 1;
      return e;
    }
    case absl::StatusCode::kUnavailable: {
      HttpError e = MakeHttpError(503, message, "unavailable_error", "unavailable");
      e.retry_after_s = 1;
      return e;
    }
    case absl::StatusCode::kUnimplemented:
      return MakeHttpError(501, message, "not_implemented_error", "not_implemented");
    default:
      return MakeHttpError(500, message, "server_error", "internal_error");
  }
}

}  // namespace pagoda::server::http
