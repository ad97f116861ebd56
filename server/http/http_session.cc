#include "server/http/http_session.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/access_log.h"
#include "server/admission.h"
#include "server/http/request_framing.h"
#include "server/http/tokenize_routes.h"
#include "spdlog/spdlog.h"

namespace pagoda::server::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using nlohmann::json;

constexpr uint64_t kBodyLimit = 16 << 20;                    // bytes of a request body at most
constexpr absl::Duration kWriteTimeout = absl::Seconds(30);  // writing a whole response
// Bytes after a request that a generation's disconnect watch keeps unparsed at most: a
// client may pipeline a small request behind it (RFC 9112 §9.3.2 discourages pipelining
// after a POST); one that sends more is cut instead of buffered.
constexpr size_t kPipelinedLimit = 8 << 10;

std::chrono::steady_clock::duration Chrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(d);
}

std::string ChunkOf(const std::string& data) {
  return absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n");
}

const char* IdPrefix(ApiKind kind) { return kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-"; }

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket socket, std::shared_ptr<HttpContext> context)
    : stream_(std::move(socket)), context_(std::move(context)) {}

void HttpSession::Run() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->DoRead(); });
}

void HttpSession::DoRead() {
  if (closed_) return;
  parser_.emplace();
  parser_->body_limit(kBodyLimit);
  keep_alive_ = true;
  response_complete_ = false;
  cors_headers_.clear();
  stream_.expires_after(Chrono(context_->options().idle_timeout));
  bhttp::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

void HttpSession::OnHeader(beast::error_code ec) {
  if (ec) return OnRead(ec);
  // Before any byte of the body is read, so none of it can pass for the next request.
  if (absl::Status framing = CheckRequestFraming(parser_->get()); !framing.ok()) {
    keep_alive_ = false;
    return RespondError(framing.code() == absl::StatusCode::kUnimplemented
                            ? ToHttpError(framing)
                            : MakeHttpError(400, std::string(framing.message()),
                                            "invalid_request_error", "bad_request"));
  }
  auto read_body = [self = shared_from_this()] {
    bhttp::async_read(self->stream_, self->buffer_, *self->parser_,
                      [self](beast::error_code ec, size_t) { self->OnRead(ec); });
  };
  // curl sends "Expect: 100-continue" before a body over 1 KiB and waits a second for
  // the go-ahead: give it at once.
  auto it = parser_->get().find(bhttp::field::expect);
  if (it == parser_->get().end() || !beast::iequals(it->value(), "100-continue")) {
    return read_body();
  }
  static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  net::async_write(stream_, net::buffer(kContinue),
                   [self = shared_from_this(), read_body](beast::error_code ec, size_t) {
                     if (ec) return self->Close();
                     read_body();
                   });
}

void HttpSession::OnRead(beast::error_code ec) {
  if (ec == bhttp::error::body_limit) {
    keep_alive_ = false;
    RespondError(MakeHttpError(413, absl::StrCat("request body is over ", kBodyLimit, " bytes"),
                               "invalid_request_error", "request_too_large"));
    return;
  }
  if (ec) {
    // end_of_stream, timeout, reset, or a malformed request: nothing to answer to.
    if (ec != bhttp::error::end_of_stream && ec != beast::error::timeout &&
        ec != net::error::operation_aborted && ec != net::error::connection_reset &&
        ec != net::error::eof && !closed_ && buffer_.size() > 0) {
      keep_alive_ = false;
      RespondError(MakeHttpError(400, absl::StrCat("malformed HTTP request: ", ec.message()),
                                 "invalid_request_error", "bad_request"));
      return;
    }
    Close();
    return;
  }
  const Request& req = parser_->get();
  keep_alive_ = req.keep_alive();
  stream_.expires_never();
  request_start_ = absl::Now();
  Route(req);
}

absl::StatusOr<Caller> HttpSession::Authenticate(const Request& req) const {
  std::optional<absl::string_view> value;
  auto it = req.find(bhttp::field::authorization);
  if (it != req.end()) value = absl::string_view(it->value().data(), it->value().size());
  absl::StatusOr<Caller> caller = context_->deps().tenants->Authenticate(value);
  if (!caller.ok() && !value.has_value()) {
    // The registry's message names gRPC metadata.
    return absl::UnauthenticatedError(
        "missing API key: send the header 'Authorization: Bearer <key>'");
  }
  return caller;
}

void HttpSession::Route(const Request& req) {
  std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  const bool get = req.method() == bhttp::verb::get;
  const bool post = req.method() == bhttp::verb::post;
  if (HandleCors(req)) return;
  if (path == "/health" || path == "/metrics") {
    if (!get)
      return RespondError(
          MakeHttpError(405, "use GET", "invalid_request_error", "method_not_allowed"));
    if (path == "/health") return RespondHealth();
    // The door is public: with keys configured, tenant names and token counts need one too
    // (the probe port, --metrics-port, is the private scrape port and has no tenants).
    if (context_->options().routes == RouteSet::kOpenAi) {
      if (absl::StatusOr<Caller> caller = Authenticate(req); !caller.ok()) {
        return RespondError(ToHttpError(caller.status()));
      }
    }
    return Respond(200, "text/plain; version=0.0.4", context_->deps().render_metrics());
  }
  const bool known = context_->options().routes == RouteSet::kOpenAi &&
                     (path == "/v1/completions" || path == "/v1/chat/completions" ||
                      path == "/apply-template" || path == "/tokenize" || path == "/detokenize" ||
                      path == "/v1/models" || path.starts_with("/v1/models/"));
  if (!known) {
    return RespondError(MakeHttpError(404, absl::StrCat("no route for ", std::string(path)),
                                      "invalid_request_error", "unknown_url"));
  }
  if (context_->draining()) {
    keep_alive_ = false;
    return RespondError(ToHttpError(absl::UnavailableError("the server is draining")));
  }
  if (path == "/v1/models" || path.starts_with("/v1/models/")) {
    if (!get)
      return RespondError(
          MakeHttpError(405, "use GET", "invalid_request_error", "method_not_allowed"));
    return HandleModels(req, path == "/v1/models" ? std::string_view() : path.substr(11));
  }
  if (!post)
    return RespondError(
        MakeHttpError(405, "use POST", "invalid_request_error", "method_not_allowed"));
  if (path == "/apply-template") return HandleJsonRoute(req, ApplyTemplateBody, true);
  if (path == "/tokenize") return HandleJsonRoute(req, TokenizeBody, false);
  if (path == "/detokenize") return HandleJsonRoute(req, DetokenizeBody, false);
  HandleGeneration(req, path == "/v1/chat/completions" ? ApiKind::kChat : ApiKind::kCompletion);
}

void HttpSession::HandleGeneration(const Request& req, ApiKind kind) {
  absl::StatusOr<Caller> caller = Authenticate(req);
  // Authentication and the rate limit first: a refused caller costs no parsing.
  if (absl::Status admitted = AdmitCaller(caller); !admitted.ok()) {
    return RefuseGeneration(caller.ok() ? caller->tenant->engine.name : std::string(), admitted,
                            ToHttpError(admitted));
  }
  // Parsing, the chat template and tokenizing run on the preparation threads; the result
  // comes back to this connection's strand.
  auto executor = stream_.get_executor();
  auto self = shared_from_this();
  auto wake = [self, executor] { net::post(executor, [self] { self->OnWake(); }); };
  const bool offloaded =
      context_->Offload([self, executor, kind, caller = *caller, body = req.body(), wake] {
        auto prepared = std::make_shared<PreparedGeneration>(
            PrepareGeneration(*self->context_, kind, caller, body, wake));
        net::post(executor, [self, kind, caller, prepared] {
          self->StartGeneration(kind, caller, std::move(*prepared));
        });
      });
  if (!offloaded) {
    RefuseGeneration(caller->tenant->engine.name, HttpContext::BusyError(),
                     ToHttpError(HttpContext::BusyError()));
  }
}

void HttpSession::RefuseGeneration(const std::string& tenant, const absl::Status& status,
                                   const HttpError& answer) {
  context_->deps().metrics->ForTenant(tenant).request_failure.Inc(
      absl::StatusCodeToString(status.code()));
  const std::string code = absl::StatusCodeToString(status.code());
  spdlog::info("http {}", FormatAccessLog({.tenant = tenant,
                                           .status = code,
                                           .error = status.message(),
                                           .e2e = absl::Now() - request_start_}));
  RespondError(answer);
}

void HttpSession::StartGeneration(ApiKind kind, const Caller& caller, PreparedGeneration p) {
  if (!p.refused.ok()) {
    return RefuseGeneration(caller.tenant->engine.name, p.refused, *p.answer);
  }
  Generation g;
  g.kind = kind;
  g.stream = p.stream;
  g.include_usage = p.include_usage;
  g.caller = caller;
  g.tokens = std::move(p.tokens);
  g.metrics = &context_->deps().metrics->ForTenant(g.caller.tenant->engine.name);
  g.start = request_start_;
  const int32_t n = p.n;
  g.texts.resize(n);
  g.reasons.resize(n, engine::FinishReason::kNone);
  g.ended.resize(n, false);
  if (p.logprobs) {
    const TokenBytesFn token_bytes = TokenBytesOf(*context_->deps().engine);
    for (int32_t i = 0; i < n; ++i) g.logprobs.emplace_back(kind, token_bytes);
  }
  g.link = std::move(p.link);
  g.metrics->prompt_tokens.fetch_add(p.submitted.prompt_tokens);
  g.handle = p.submitted.handle;
  g.request_id = p.submitted.request_id;
  g.prompt_tokens = p.submitted.prompt_tokens;
  g.registration = p.registration;
  g.format.emplace(kind, IdPrefix(kind) + p.submitted.request_id, absl::ToUnixSeconds(g.start),
                   p.model.empty() ? context_->deps().model_name : p.model);
  if (p.tool_calls.has_value()) {
    g.format->set_tool_calls(*p.tool_calls);
    if (g.stream) g.tool_calls.emplace(*p.tool_calls, n);
  }
  gen_ = std::move(g);
  if (gen_->stream) {
    Write(
        absl::StrCat("HTTP/1.1 200 OK\r\nServer: pagoda\r\nContent-Type: text/event-stream\r\n"
                     "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n",
                     cors_headers_, "\r\n"));
    if (kind == ApiKind::kChat) {
      for (int32_t i = 0; i < n; ++i) {
        Write(ChunkOf(gen_->format->RoleChunk(i, gen_->include_usage)));
      }
    }
  }
  WatchDisconnect();
  // A wake that came before gen_ was set found nothing to do and took nothing: take now.
  OnWake();
}

void HttpSession::OnWake() {
  if (!gen_ || gen_->done) return;
  // Always taken, so every output wakes the connection and the unsent bytes are counted here.
  const OutputBatch batch = gen_->link->Take();
  Generation& g = *gen_;
  g.tokens->Use(batch.num_tokens);
  if (batch.finished()) g.tokens->Settle();
  g.completion_tokens += batch.num_tokens;
  g.metrics->generation_tokens.fetch_add(batch.num_tokens);
  for (const double gap : batch.token_gaps) g.metrics->inter_token_latency.Observe(gap);
  if (closed_ || !g.cut.ok()) {
    if (batch.finished()) FinishGeneration(batch);
    return;
  }
  for (size_t i = 0; i < g.texts.size() && i < batch.samples.size(); ++i) {
    g.texts[i] += batch.samples[i].text;
    if (!g.logprobs.empty()) g.logprobs[i].Add(batch.samples[i]);
    if (batch.samples[i].finish_reason != engine::FinishReason::kNone) {
      g.reasons[i] = batch.samples[i].finish_reason;
    }
  }
  if (batch.finished()) return FinishGeneration(batch);
  if (g.stream) {
    WriteEndedSamples();
    if (!writing_) FlushText();
  }
  CutIfOverUnsentCap();
}

void HttpSession::FlushText() {
  Generation& g = *gen_;
  for (size_t i = 0; i < g.texts.size(); ++i) {
    if (g.texts[i].empty() || g.ended[i]) continue;
    WriteText(i, /*at_end=*/false);
  }
}

void HttpSession::WriteText(size_t i, bool at_end) {
  Generation& g = *gen_;
  const int32_t index = static_cast<int32_t>(i);
  const json logprobs = TakeLogprobs(g.logprobs, i, g.texts[i], /*all=*/at_end);
  if (!g.tool_calls.has_value()) {
    Write(ChunkOf(g.format->Chunk(index, g.texts[i], "", g.include_usage, logprobs)));
  } else if (const chat::ToolCallStreamDelta d = g.tool_calls->Next(i, g.texts[i], at_end);
             !d.empty() || !logprobs.is_null()) {
    Write(ChunkOf(g.format->DeltaChunk(index, d, g.include_usage, logprobs)));
  }
  g.texts[i].clear();
}

void HttpSession::WriteEndedSamples() {
  Generation& g = *gen_;
  for (size_t i = 0; i < g.texts.size(); ++i) {
    // An error or abort ends the whole request, reported by FinishGeneration.
    const engine::FinishReason r = g.reasons[i];
    if (g.ended[i] || r == engine::FinishReason::kNone || r == engine::FinishReason::kError ||
        r == engine::FinishReason::kAbort) {
      continue;
    }
    // The text first, then an event with no text carrying the finish reason (as OpenAI
    // and llama-server): a client that stops reading at finish_reason loses no text.
    const int32_t index = static_cast<int32_t>(i);
    if (!g.texts[i].empty() || g.tool_calls.has_value()) WriteText(i, /*at_end=*/true);
    const std::string reason = g.tool_calls.has_value()
                                   ? g.tool_calls->FinishReason(i, engine::FinishReasonName(r))
                                   : engine::FinishReasonName(r);
    Write(ChunkOf(g.format->Chunk(index, "", reason, g.include_usage,
                                  TakeLogprobs(g.logprobs, i, "", /*all=*/true))));
    g.ended[i] = true;
  }
}

int64_t HttpSession::UnsentBytes() {
  int64_t pending = 0;
  if (gen_) {
    for (const std::string& t : gen_->texts) pending += static_cast<int64_t>(t.size());
  }
  int64_t unsent = out_bytes_ + pending;
  int in_socket = 0;  // written but not yet acknowledged by the peer
  if (ioctl(stream_.socket().native_handle(), SIOCOUTQ, &in_socket) == 0) unsent += in_socket;
  return unsent;
}

bool HttpSession::CutIfOverUnsentCap() {
  const int64_t cap = context_->options().max_unsent_bytes;
  if (cap <= 0 || !gen_ || gen_->done || gen_->aborted || closed_) return false;
  const int64_t unsent = UnsentBytes();
  if (unsent <= cap) return false;
  Generation& g = *gen_;
  const std::string over = absl::StrCat(unsent, " bytes of output unsent exceed ", cap,
                                        " (max_unsent_bytes_per_stream)");
  g.cut = absl::ResourceExhaustedError(
      g.stream ? absl::StrCat("client is not reading: ", over)
               : absl::StrCat("response not sent yet: ", over,
                              "; stream long outputs (\"stream\": true)"));
  spdlog::warn("http [{}] aborted: {}", QuoteLogValue(g.request_id), std::string(g.cut.message()));
  g.metrics->requests_unsent_limit.fetch_add(1);
  g.metrics->request_failure.Inc(absl::StatusCodeToString(g.cut.code()));
  g.aborted = true;
  for (std::string& t : g.texts) t.clear();
  // The engine frees the request's blocks within a step; its last output unregisters it.
  context_->deps().engine->Abort(g.handle);
  keep_alive_ = false;
  if (g.stream) {
    Close();  // the status line is out: an SSE stream cannot carry a status any more
  } else {
    RespondError(ToHttpError(g.cut));
  }
  return true;
}

void HttpSession::FinishGeneration(const OutputBatch& batch) {
  Generation& g = *gen_;
  g.done = true;
  context_->Unregister(g.registration);
  g.link->Detach();  // here, on this session's executor (see GenerationLink)
  const bool failed = batch.finish_reason == engine::FinishReason::kError;
  if (failed) {
    g.metrics->request_failure.Inc(absl::StatusCodeToString(batch.error.code()));
  } else if (batch.finish_reason != engine::FinishReason::kAbort) {
    g.metrics->request_success.Inc(engine::FinishReasonName(batch.finish_reason));
    g.metrics->e2e_request_latency.Observe(absl::ToDoubleSeconds(absl::Now() - g.start));
    g.metrics->request_queue_time.Observe(absl::ToDoubleSeconds(batch.usage.queue_time));
    if (batch.usage.completion_tokens > 0) {
      g.metrics->time_to_first_token.Observe(
          absl::ToDoubleSeconds(batch.usage.time_to_first_token));
    }
  }
  LogAccess(!g.cut.ok() ? g.cut
            : failed    ? batch.error
                        : absl::OkStatus(),
            batch.finish_reason, &batch.usage);
  if (closed_ || !g.cut.ok()) return;  // cut at the unsent cap: its answer is already out
  if (!g.stream) {
    if (failed) return RespondError(ToHttpError(batch.error));
    std::vector<std::string> reasons;
    for (engine::FinishReason r : g.reasons) reasons.push_back(engine::FinishReasonName(r));
    return Respond(200, "application/json",
                   g.format->Full(g.texts, reasons, batch.usage, TakeAll(g.logprobs, g.texts)));
  }
  if (failed) {
    keep_alive_ = false;
    Write(ChunkOf(ResponseFormatter::ErrorEvent(ToHttpError(batch.error).body)));
  } else {
    WriteEndedSamples();
    if (g.include_usage) Write(ChunkOf(g.format->UsageChunk(batch.usage)));
    Write(ChunkOf(ResponseFormatter::Done()));
  }
  Write("0\r\n\r\n");
  response_complete_ = true;
  if (!writing_) EndResponse();
}

void HttpSession::LogAccess(const absl::Status& status, engine::FinishReason reason,
                            const engine::Usage* usage) {
  const Generation& g = *gen_;
  const std::string code = absl::StatusCodeToString(status.code());
  AccessLogEntry e{.tenant = g.caller.tenant->engine.name,
                   .request_id = g.request_id,
                   .status = code,
                   .finish_reason = engine::FinishReasonName(reason),
                   .error = status.message(),
                   .prompt_tokens = g.prompt_tokens,
                   .completion_tokens = g.completion_tokens,
                   .e2e = absl::Now() - g.start};
  if (usage != nullptr) {
    e.cached_tokens = usage->cached_tokens;
    e.queue_time = usage->queue_time;
    if (usage->completion_tokens > 0) e.time_to_first_token = usage->time_to_first_token;
  }
  spdlog::info("http {}", FormatAccessLog(e));
}

void HttpSession::Respond(int status, const std::string& content_type, const std::string& body,
                          std::optional<int64_t> retry_after) {
  if (context_->draining()) keep_alive_ = false;
  std::string head =
      absl::StrFormat("HTTP/1.1 %d %s\r\nServer: pagoda\r\n", status,
                      std::string(bhttp::obsolete_reason(static_cast<bhttp::status>(status))));
  // A 204 has neither a body nor Content-Length (RFC 9110 §8.6).
  if (status != 204) {
    absl::StrAppend(&head, "Content-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                    "\r\n");
  }
  head += cors_headers_;
  if (retry_after.has_value()) absl::StrAppend(&head, "Retry-After: ", *retry_after, "\r\n");
  if (!keep_alive_) head += "Connection: close\r\n";
  head += "\r\n";
  head += body;
  stream_.expires_after(Chrono(kWriteTimeout));
  Write(std::move(head));
  response_complete_ = true;
}

void HttpSession::RespondError(const HttpError& error) {
  Respond(error.status, "application/json", error.body, error.retry_after_s);
}

void HttpSession::Write(std::string bytes) {
  if (closed_) return;
  out_bytes_ += static_cast<int64_t>(bytes.size());
  out_.push_back(std::move(bytes));
  if (writing_) return;
  writing_ = true;
  net::async_write(
      stream_, net::buffer(out_.front()),
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
}

void HttpSession::OnWrite(beast::error_code ec) {
  writing_ = false;
  if (ec) {
    out_.clear();
    out_bytes_ = 0;
    ClientGone();  // the engine's last output still wakes this connection: OnWake takes it
    return;
  }
  out_bytes_ -= static_cast<int64_t>(out_.front().size());
  out_.pop_front();
  if (!out_.empty()) {
    writing_ = true;
    net::async_write(
        stream_, net::buffer(out_.front()),
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
    return;
  }
  if (gen_ && gen_->stream && !gen_->done && !closed_) {
    FlushText();  // what arrived while the write was in flight, as one event
    if (writing_) return;
  }
  if (response_complete_) EndResponse();
}

void HttpSession::EndResponse() {
  response_complete_ = false;
  if (gen_ && gen_->done) gen_.reset();
  if (!keep_alive_ || context_->draining()) {
    Close();
    return;
  }
  if (watching_) {
    next_after_watch_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);  // OnWatch then reads the next request
    return;
  }
  DoRead();
}

void HttpSession::WatchDisconnect() {
  if (closed_ || watching_) return;
  watching_ = true;
  stream_.socket().async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnWatch(ec, n); });
}

void HttpSession::OnWatch(beast::error_code ec, size_t n) {
  watching_ = false;
  if (!ec) buffer_.commit(n);  // a pipelined request: parsed once this response is done
  if (next_after_watch_) {
    next_after_watch_ = false;
    if (!ec || ec == net::error::operation_aborted) return DoRead();
    return Close();
  }
  if (!ec) {
    if (buffer_.size() <= kPipelinedLimit) return WatchDisconnect();
    spdlog::warn("http [{}] aborted: the client pipelined {} bytes behind it (at most {})",
                 gen_ ? QuoteLogValue(gen_->request_id) : std::string(), buffer_.size(),
                 kPipelinedLimit);
    return ClientGone();  // aborted as if the peer had left, and the connection closed
  }
  if (ec == net::error::operation_aborted) return;
  ClientGone();  // the peer closed or reset the connection
}

void HttpSession::ClientGone() {
  if (gen_ && !gen_->done && !gen_->aborted) {
    gen_->aborted = true;
    gen_->metrics->requests_cancelled.fetch_add(1);
    // The engine frees the request's blocks within a step and sends its last output,
    // which unregisters it (OnWake -> FinishGeneration).
    context_->deps().engine->Abort(gen_->handle);
  }
  Close();
}

void HttpSession::Close() {
  if (closed_) return;
  closed_ = true;  // a write in flight still owns out_.front(); OnWrite clears it
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

}  // namespace pagoda::server::http
