// Errors at the HTTP edge: an absl::Status to the HTTP status code and OpenAI's error body
// {"error": {"message", "type", "code"}}.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"

namespace pagoda::server::http {

struct HttpError {
  int status = 500;
  std::string body;                      // the JSON error object
  std::optional<int64_t> retry_after_s;  // Retry-After seconds (429, 503)
};

// InvalidArgument, FailedPrecondition, OutOfRange -> 400 (code "context_length_exceeded"
// when IsContextLengthExceeded, else "invalid_request"); Unauthenticated -> 401;
// PermissionDenied -> 403; NotFound -> 404; ResourceExhausted -> 429 with Retry-After (the
// status's RetryInfo delay rounded up, else the default); Unavailable -> 503;
// Unimplemented -> 501; anything else -> 500. The message is the status's.
HttpError ToHttpError(const absl::Status& status);

// True for the engine's refusals of a prompt, or a prompt plus max_tokens, past the model's
// context (Engine::Validate: InvalidArgument "prompt: ...", "prompt_token_ids: ..." or
// "max_tokens: ..." naming "the context length"): OpenAI's "context_length_exceeded".
bool IsContextLengthExceeded(const absl::Status& status);

// An error with an explicit HTTP status, type and code (404 unknown path, 405, 413, ...).
HttpError MakeHttpError(int status, const std::string& message, const std::string& type,
                        const std::string& code);

}  // namespace pagoda::server::http
