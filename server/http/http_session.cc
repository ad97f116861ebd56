#include "server/http/http_session.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/access_log.h"
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
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    return HandleGeneration(req,
                            path == "/v1/chat/completions" ? ApiKind::kChat : ApiKind::kCompletion);
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
}

void HttpSession::HandleGeneration(const Request& req, ApiKind kind) {
  auto call = std::make_shared<GenerationCall>(GenerationCall::Door::kHttp,
                                               context_->deps().metrics, request_start_);
  if (context_->draining()) {
    keep_alive_ = false;
    return RefuseGeneration(*call, absl::UnavailableError("the server is draining"));
  }
  if (req.method() != bhttp::verb::post) {
    return RefuseGeneration(
        *call, absl::InvalidArgumentError("use POST"),
        MakeHttpError(405, "use POST", "invalid_request_error", "method_not_allowed"));
  }
  // Authentication and the rate limit first: a refused caller costs no parsing.
  absl::StatusOr<Caller> caller = Authenticate(req);
  if (absl::Status admitted = call->Admit(caller); !admitted.ok()) {
    return RefuseGeneration(*call, admitted);
  }
  // Parsing, the chat template and tokenizing run on the preparation threads; the result
  // comes back to this connection's strand. They touch the call only through its
  // (thread-safe) reservation; the strand keeps the rest.
  auto executor = stream_.get_executor();
  auto self = shared_from_this();
  auto wake = [self, executor] { net::post(executor, [self] { self->OnWake(); }); };
  TokenReservation* tokens = &call->tokens();
  const bool offloaded = context_->Offload(
      [self, executor, kind, call, tokens, caller = *caller, body = req.body(), wake] {
        auto prepared = std::make_shared<PreparedGeneration>(
            PrepareGeneration(*self->context_, kind, caller, body, wake, tokens));
        net::post(executor, [self, kind, call, prepared] {
          self->StartGeneration(kind, call, std::move(*prepared));
        });
      });
  if (!offloaded) RefuseGeneration(*call, HttpContext::BusyError());
}

void HttpSession::RefuseGeneration(GenerationCall& call, const absl::Status& status,
                                   std::optional<HttpError> answer) {
  call.Fail(status);  // nothing when Admit refused it already
  call.LogAccess();
  RespondError(answer.has_value() ? *answer : ToHttpError(status));
}

void HttpSession::StartGeneration(ApiKind kind, std::shared_ptr<GenerationCall> call,
                                  PreparedGeneration p) {
  if (!p.refused.ok()) return RefuseGeneration(*call, p.refused, p.answer);
  call->Accepted(p.submitted);
  Generation g;
  g.kind = kind;
  g.stream = p.stream;
  g.include_usage = p.include_usage;
  const int32_t n = p.n;
  g.texts.resize(n);
  g.reasons.resize(n, engine::FinishReason::kNone);
  g.ended.resize(n, false);
  if (p.logprobs) {
    const TokenBytesFn token_bytes = TokenBytesOf(*context_->deps().engine);
    for (int32_t i = 0; i < n; ++i) g.logprobs.emplace_back(kind, token_bytes);
  }
  g.link = std::move(p.link);
  g.handle = p.submitted.handle;
  g.registration = p.registration;
  g.format.emplace(kind, IdPrefix(kind) + p.submitted.request_id,
                   absl::ToUnixSeconds(call->start()),
                   p.model.empty() ? context_->deps().model_name : p.model);
  g.call = std::move(call);
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
  g.call->OnTokens(batch.num_tokens, batch.token_gaps);
  if (closed_ || g.cut) {
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
  const absl::Status cut =
      g.stream ? g.call->CutAtUnsentCap(unsent, cap, "client is not reading")
               : g.call->CutAtUnsentCap(unsent, cap, "response not sent yet",
                                        "; stream long outputs (\"stream\": true)");
  g.cut = true;
  g.aborted = true;
  for (std::string& t : g.texts) t.clear();
  // The engine frees the request's blocks within a step; its last output unregisters it.
  context_->client().Abort(g.handle);
  keep_alive_ = false;
  if (g.stream) {
    Close();  // the status line is out: an SSE stream cannot carry a status any more
  } else {
    RespondError(ToHttpError(cut));
  }
  return true;
}

void HttpSession::FinishGeneration(const OutputBatch& batch) {
  Generation& g = *gen_;
  g.done = true;
  context_->Unregister(g.registration);
  g.link->Detach();  // here, on this session's executor (see GenerationLink)
  const bool failed = batch.finish_reason == engine::FinishReason::kError;
  g.call->OnLast(batch.finish_reason, batch.error, batch.usage);
  g.call->LogAccess();
  if (closed_ || g.cut) return;  // cut at the unsent cap: its answer is already out
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
                 gen_ ? QuoteLogValue(gen_->call->request_id()) : std::string(), buffer_.size(),
                 kPipelinedLimit);
    return ClientGone();  // aborted as if the peer had left, and the connection closed
  }
  if (ec == net::error::operation_aborted) return;
  ClientGone();  // the peer closed or reset the connection
}

void HttpSession::ClientGone() {
  if (gen_ && !gen_->done && !gen_->aborted) {
    gen_->aborted = true;
    gen_->call->ClientGone("the client closed the connection");
    // The engine frees the request's blocks within a step and sends its last output,
    // which unregisters it (OnWake -> FinishGeneration).
    context_->client().Abort(gen_->handle);
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
