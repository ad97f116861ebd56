// What answers the requests of one HTTP connection, whatever carries them (HttpSession: the
// HTTP/1.1 transport): CORS, routing (the server's RouteSet), authentication, the JSON
// routes, /v1/models, /health, /metrics and generations (GenerationResponse). It answers
// through a ResponseWriter, at once or later on the connection's strand (work off the event
// loop comes back through ResponseWriter::Poster). Everything but the posted work is called on
// that strand; the writer owns the router (or outlives it and everything it posted).
//
// A generation route's GenerationCall exists before anything is checked, so every refusal
// (draining, method, key, rate, body) is counted and logged like any other request. With keys
// configured, the OpenAI door's /metrics needs one.
#pragma once

#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/generation_call.h"
#include "server/http/generation_prep.h"
#include "server/http/generation_response.h"
#include "server/http/http_context.h"
#include "server/http/http_error.h"
#include "server/http/openai_response.h"
#include "server/http/response_writer.h"
#include "server/tenant_registry.h"

namespace pagoda::server::http {

class HttpRouter {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  HttpRouter(HttpContext& context, ResponseWriter& writer);
  HttpRouter(const HttpRouter&) = delete;
  HttpRouter& operator=(const HttpRouter&) = delete;

  // Answers `req`, read at `start` (a generation's timings and "created" count from it).
  // The previous response ended (OnResponseEnd).
  void Handle(const Request& req, absl::Time start);

  // A request the transport refused before reading its body (`status`, answered with
  // `answer`: framing it cannot trust, a body over the limit); `req` holds its header only.
  // On a generation route it is a generation refused like any other: its caller
  // authenticated and rate-checked as HandleGeneration does, then counted and logged.
  void RefuseUnread(const Request& req, const absl::Status& status, const HttpError& answer,
                    absl::Time start);

  // The writer's events, on the strand.
  // Its write queue drained.
  void OnWritesDone();
  // The response's last byte is written.
  void OnResponseEnd();
  // The client went away (the connection is closing): a generation in flight is aborted.
  void OnClientGone();

  // The generation in progress's request id as logged (QuoteLogValue); "" when none.
  std::string GenerationIdForLog() const;

 private:
  // With --cors-allow-origin: sets the CORS headers of an allowed Origin and answers a
  // preflight (OPTIONS: 204 with the Access-Control-Allow-* headers, or 403 for an origin
  // not allowed). True when it answered.
  bool HandleCors(const Request& req);
  // GET /health: JSON on the OpenAI door, "SERVING\n" / "NOT_SERVING\n" on the probe port.
  void RespondHealth();
  void HandleMetrics(const Request& req);
  void HandleGeneration(const Request& req, ApiKind kind, absl::Time start);
  // Whether `req` names /v1/completions or /v1/chat/completions on the OpenAI door.
  bool IsGenerationRoute(const Request& req) const;
  // A body-in, body-out route: authenticates, parses the JSON body and answers `route`'s
  // body (200) or error (/apply-template, /tokenize, /detokenize: tokenize_routes.h), off
  // the event loop. `rate_limited`: admitted by the caller's token bucket and charged a
  // token per 4 bytes of the answer (/apply-template).
  void HandleJsonRoute(const Request& req, const JsonRoute& route, bool rate_limited);
  void HandleModels(const Request& req, std::string_view id);
  // The caller the Authorization header names (shared with gRPC: TenantRegistry).
  absl::StatusOr<Caller> Authenticate(const Request& req) const;
  // On the strand, once the preparation threads are done with the request (generation_prep.h).
  void StartGeneration(ApiKind kind, std::shared_ptr<GenerationCall> call,
                       PreparedGeneration prepared);
  // Answers a generation refused before it reached the engine (`answer`, else the status's
  // own), counted and logged by its call.
  void RefuseGeneration(GenerationCall& call, const absl::Status& status,
                        std::optional<HttpError> answer = std::nullopt);
  void OnWake();

  HttpContext& context_;
  ResponseWriter& writer_;
  std::optional<GenerationResponse> gen_;  // the generation of the current response
};

}  // namespace pagoda::server::http
