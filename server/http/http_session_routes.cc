// HttpSession's routes that answer at once or from one JSON body: CORS preflights,
// /health, /v1/models and the body-in, body-out routes (/apply-template, /tokenize,
// /detokenize). Generations are in http_session.cc.
#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "server/admission.h"
#include "server/http/cors.h"
#include "server/http/http_session.h"
#include "server/http/models_route.h"

namespace pagoda::server::http {
namespace {

namespace bhttp = boost::beast::http;
namespace net = boost::asio;

// The value of header `field`; "" when absent.
std::string_view HeaderValue(const bhttp::request_header<>& req, bhttp::field field) {
  auto it = req.find(field);
  return it == req.end() ? std::string_view()
                         : std::string_view(it->value().data(), it->value().size());
}

}  // namespace

bool HttpSession::HandleCors(const Request& req) {
  const std::vector<std::string>& allowed = context_->options().cors_allow_origins;
  if (allowed.empty() || context_->options().routes != RouteSet::kOpenAi) return false;
  const CorsOutcome cors =
      CorsFor(allowed, HeaderValue(req, bhttp::field::origin), req.method() == bhttp::verb::options,
              HeaderValue(req, bhttp::field::access_control_request_headers));
  cors_headers_ = cors.headers;
  if (!cors.preflight) return false;
  if (cors.headers.empty()) {
    RespondError(MakeHttpError(403, "origin not allowed (--cors-allow-origin)", "permission_error",
                               "origin_not_allowed"));
  } else {
    Respond(204, "", "");
  }
  return true;
}

void HttpSession::RespondHealth() {
  const bool ok = context_->deps().serving() && !context_->draining();
  if (context_->options().routes == RouteSet::kProbes) {
    return Respond(ok ? 200 : 503, "text/plain", ok ? "SERVING\n" : "NOT_SERVING\n");
  }
  Respond(ok ? 200 : 503, "application/json",
          ok ? R"({"status":"ok"})" : R"({"status":"unavailable"})");
}

void HttpSession::HandleModels(const Request& req, std::string_view id) {
  if (absl::StatusOr<Caller> caller = Authenticate(req); !caller.ok()) {
    return RespondError(ToHttpError(caller.status()));
  }
  const std::optional<std::string> body = ModelsBody(
      context_->deps().model_name, context_->deps().engine->model_info(), context_->created(), id);
  if (!body.has_value()) {
    return RespondError(
        MakeHttpError(404, absl::StrCat("model \"", std::string(id), "\" does not exist"),
                      "invalid_request_error", "model_not_found"));
  }
  Respond(200, "application/json", *body);
}

void HttpSession::HandleJsonRoute(const Request& req, const JsonRoute& route, bool rate_limited) {
  absl::StatusOr<Caller> caller = Authenticate(req);
  if (!caller.ok()) return RespondError(ToHttpError(caller.status()));
  if (rate_limited) {
    if (absl::Status admitted = AdmitCaller(caller); !admitted.ok()) {
      return RespondError(ToHttpError(admitted));
    }
  }
  // Off the event loop, like a generation's preparation.
  auto executor = stream_.get_executor();
  std::shared_ptr<TokenBucket> charged = rate_limited ? caller->bucket : nullptr;
  const bool offloaded =
      context_->Offload([self = shared_from_this(), executor, route, body = req.body(), charged] {
        absl::StatusOr<std::string> out =
            AnswerJsonRoute(*self->context_->deps().engine, route, body, charged.get());
        net::post(executor, [self, out = std::move(out)] {
          if (!out.ok()) return self->RespondError(ToHttpError(out.status()));
          self->Respond(200, "application/json", *out);
        });
      });
  if (!offloaded) RespondError(ToHttpError(HttpContext::BusyError()));
}

}  // namespace pagoda::server::http
