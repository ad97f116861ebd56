#include "server/http/http_router.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/access_log.h"
#include "server/admission.h"
#include "server/http/cors.h"
#include "server/http/models_route.h"
#include "server/http/tokenize_routes.h"

namespace pagoda::server::http {
namespace {

namespace bhttp = boost::beast::http;

// The value of header `field`; "" when absent.
std::string_view HeaderValue(const bhttp::request_header<>& req, bhttp::field field) {
  auto it = req.find(field);
  return it == req.end() ? std::string_view()
                         : std::string_view(it->value().data(), it->value().size());
}

// The routes that generate: completions, chat completions, responses.
bool IsGenerationPath(std::string_view path) {
  return path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/responses";
}

HttpError MethodNotAllowed(const char* use) {
  return MakeHttpError(405, use, "invalid_request_error", "method_not_allowed");
}

}  // namespace

HttpRouter::HttpRouter(HttpContext& context, ResponseWriter& writer)
    : context_(context), writer_(writer) {}

void HttpRouter::Handle(const Request& req, absl::Time start) {
  std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  const bool get = req.method() == bhttp::verb::get;
  const bool post = req.method() == bhttp::verb::post;
  if (HandleCors(req)) return;
  if (path == "/health" || path == "/metrics") {
    if (!get) return writer_.RespondError(MethodNotAllowed("use GET"));
    if (path == "/health") return RespondHealth();
    return HandleMetrics(req);
  }
  const bool known =
      context_.options().routes == RouteSet::kOpenAi &&
      (IsGenerationPath(path) || path == "/apply-template" || path == "/tokenize" ||
       path == "/detokenize" || path == "/v1/models" || path.starts_with("/v1/models/"));
  if (!known) {
    return writer_.RespondError(MakeHttpError(404, absl::StrCat("no route for ", std::string(path)),
                                              "invalid_request_error", "unknown_url"));
  }
  if (IsGenerationPath(path)) {
    const ApiKind kind = path == "/v1/chat/completions" ? ApiKind::kChat
                         : path == "/v1/responses"      ? ApiKind::kResponses
                                                        : ApiKind::kCompletion;
    return HandleGeneration(req, kind, start);
  }
  if (context_.draining()) {
    writer_.CloseAfterResponse();
    return writer_.RespondError(ToHttpError(absl::UnavailableError("the server is draining")));
  }
  if (path == "/v1/models" || path.starts_with("/v1/models/")) {
    if (!get) return writer_.RespondError(MethodNotAllowed("use GET"));
    return HandleModels(req, path == "/v1/models" ? std::string_view() : path.substr(11));
  }
  if (!post) return writer_.RespondError(MethodNotAllowed("use POST"));
  if (path == "/apply-template") return HandleJsonRoute(req, ApplyTemplateBody, true);
  if (path == "/tokenize") return HandleJsonRoute(req, TokenizeBody, false);
  if (path == "/detokenize") return HandleJsonRoute(req, DetokenizeBody, false);
}

void HttpRouter::OnWritesDone() {
  if (gen_) gen_->OnWritesDone();
}

void HttpRouter::OnResponseEnd() {
  if (gen_ && gen_->done()) gen_.reset();
}

void HttpRouter::OnClientGone() {
  if (gen_) gen_->OnClientGone();
}

std::string HttpRouter::GenerationIdForLog() const {
  return gen_ ? QuoteLogValue(gen_->call().request_id()) : std::string();
}

absl::StatusOr<Caller> HttpRouter::Authenticate(const Request& req) const {
  std::optional<absl::string_view> value;
  auto it = req.find(bhttp::field::authorization);
  if (it != req.end()) value = absl::string_view(it->value().data(), it->value().size());
  absl::StatusOr<Caller> caller = context_.deps().tenants->Authenticate(value);
  if (!caller.ok() && !value.has_value()) {
    // The registry's message names gRPC metadata.
    return absl::UnauthenticatedError(
        "missing API key: send the header 'Authorization: Bearer <key>'");
  }
  return caller;
}

bool HttpRouter::HandleCors(const Request& req) {
  const std::vector<std::string>& allowed = context_.options().cors_allow_origins;
  if (allowed.empty() || context_.options().routes != RouteSet::kOpenAi) return false;
  const CorsOutcome cors =
      CorsFor(allowed, HeaderValue(req, bhttp::field::origin), req.method() == bhttp::verb::options,
              HeaderValue(req, bhttp::field::access_control_request_headers));
  writer_.SetExtraHeaders(cors.headers);
  if (!cors.preflight) return false;
  if (cors.headers.empty()) {
    writer_.RespondError(MakeHttpError(403, "origin not allowed (--cors-allow-origin)",
                                       "permission_error", "origin_not_allowed"));
  } else {
    writer_.Respond(204, "", "");
  }
  return true;
}

void HttpRouter::RespondHealth() {
  const bool ok = context_.deps().serving() && !context_.draining();
  if (context_.options().routes == RouteSet::kProbes) {
    return writer_.Respond(ok ? 200 : 503, "text/plain", ok ? "SERVING\n" : "NOT_SERVING\n");
  }
  writer_.Respond(ok ? 200 : 503, "application/json",
                  ok ? R"({"status":"ok"})" : R"({"status":"unavailable"})");
}

void HttpRouter::HandleMetrics(const Request& req) {
  // The door is public: with keys configured, tenant names and token counts need one too
  // (the probe port, --metrics-port, is the private scrape port and has no tenants).
  if (context_.options().routes == RouteSet::kOpenAi) {
    if (absl::StatusOr<Caller> caller = Authenticate(req); !caller.ok()) {
      return writer_.RespondError(ToHttpError(caller.status()));
    }
  }
  writer_.Respond(200, "text/plain; version=0.0.4", context_.deps().render_metrics());
}

void HttpRouter::HandleModels(const Request& req, std::string_view id) {
  if (absl::StatusOr<Caller> caller = Authenticate(req); !caller.ok()) {
    return writer_.RespondError(ToHttpError(caller.status()));
  }
  const std::optional<std::string> body = ModelsBody(
      context_.deps().model_name, context_.deps().engine->model_info(), context_.created(), id);
  if (!body.has_value()) {
    return writer_.RespondError(
        MakeHttpError(404, absl::StrCat("model \"", std::string(id), "\" does not exist"),
                      "invalid_request_error", "model_not_found"));
  }
  writer_.Respond(200, "application/json", *body);
}

void HttpRouter::HandleJsonRoute(const Request& req, const JsonRoute& route, bool rate_limited) {
  absl::StatusOr<Caller> caller = Authenticate(req);
  if (!caller.ok()) return writer_.RespondError(ToHttpError(caller.status()));
  if (rate_limited) {
    if (absl::Status admitted = AdmitCaller(caller); !admitted.ok()) {
      return writer_.RespondError(ToHttpError(admitted));
    }
  }
  // Off the event loop, like a generation's preparation; `post` keeps the connection (and
  // so this router) alive until the answer is back on its strand.
  std::shared_ptr<TokenBucket> charged = rate_limited ? caller->bucket : nullptr;
  const absl::Status offloaded =
      context_.Offload(caller->tenant->engine.name,
                       [this, post = writer_.Poster(), route, body = req.body(), charged] {
                         absl::StatusOr<std::string> out =
                             AnswerJsonRoute(*context_.deps().engine, route, body, charged.get());
                         post([this, out = std::move(out)] {
                           if (!out.ok()) return writer_.RespondError(ToHttpError(out.status()));
                           writer_.Respond(200, "application/json", *out);
                         });
                       });
  if (!offloaded.ok()) writer_.RespondError(ToHttpError(offloaded));
}

void HttpRouter::HandleGeneration(const Request& req, ApiKind kind, absl::Time start) {
  auto call =
      std::make_shared<GenerationCall>(GenerationCall::Door::kHttp, context_.deps().metrics, start);
  if (context_.draining()) {
    writer_.CloseAfterResponse();
    return RefuseGeneration(*call, absl::UnavailableError("the server is draining"));
  }
  if (req.method() != bhttp::verb::post) {
    return RefuseGeneration(*call, absl::InvalidArgumentError("use POST"),
                            MethodNotAllowed("use POST"));
  }
  // Authentication and the rate limit first: a refused caller costs no parsing.
  absl::StatusOr<Caller> caller = Authenticate(req);
  if (absl::Status admitted = call->Admit(caller); !admitted.ok()) {
    return RefuseGeneration(*call, admitted);
  }
  // Parsing, the chat template and tokenizing run on the preparation threads; the result
  // comes back to this connection's strand. They touch the call only through its
  // (thread-safe) reservation; the strand keeps the rest. `post` keeps the connection (and
  // so this router) alive while it is held: by the job, and by the link until detached.
  ResponseWriter::Post post = writer_.Poster();
  auto wake = [this, post] { post([this] { OnWake(); }); };
  TokenReservation* tokens = &call->tokens();
  const absl::Status offloaded = context_.Offload(
      caller->tenant->engine.name,
      [this, post, kind, call, tokens, caller = *caller, body = req.body(), wake] {
        auto prepared = std::make_shared<PreparedGeneration>(
            PrepareGeneration(context_, kind, caller, body, wake, tokens));
        post([this, kind, call, prepared] { StartGeneration(kind, call, std::move(*prepared)); });
      });
  if (!offloaded.ok()) RefuseGeneration(*call, offloaded);
}

bool HttpRouter::IsGenerationRoute(const Request& req) const {
  const std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  return context_.options().routes == RouteSet::kOpenAi && IsGenerationPath(path);
}

void HttpRouter::RefuseUnread(const Request& req, const absl::Status& status,
                              const HttpError& answer, absl::Time start) {
  if (!IsGenerationRoute(req)) return writer_.RespondError(answer);
  GenerationCall call(GenerationCall::Door::kHttp, context_.deps().metrics, start);
  // The caller first, as for any generation: a refused one gets its own answer.
  if (absl::Status admitted = call.Admit(Authenticate(req)); !admitted.ok()) {
    return RefuseGeneration(call, admitted);
  }
  RefuseGeneration(call, status, answer);
}

void HttpRouter::RefuseGeneration(GenerationCall& call, const absl::Status& status,
                                  std::optional<HttpError> answer) {
  call.Fail(status);  // nothing when Admit refused it already
  call.LogAccess();
  writer_.RespondError(answer.has_value() ? *answer : ToHttpError(status));
}

void HttpRouter::StartGeneration(ApiKind kind, std::shared_ptr<GenerationCall> call,
                                 PreparedGeneration p) {
  if (!p.refused.ok()) return RefuseGeneration(*call, p.refused, p.answer);
  call->Accepted(p.submitted);
  gen_.emplace(context_, writer_, kind, std::move(call), std::move(p));
  gen_->Start();  // may end the response: nothing here after it
}

void HttpRouter::OnWake() {
  // A wake before gen_ was set finds nothing to do and takes nothing: Start takes it.
  if (gen_) gen_->OnWake();
}

}  // namespace pagoda::server::http
