#include "server/http/http_session.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/http/request_framing.h"
#include "spdlog/spdlog.h"

namespace pagoda::server::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;

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

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket socket, std::shared_ptr<HttpContext> context)
    : stream_(std::move(socket)), context_(std::move(context)), router_(*context_, *this) {}

void HttpSession::Run() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->DoRead(); });
}

void HttpSession::DoRead() {
  if (closed_) return;
  parser_.emplace();
  parser_->body_limit(kBodyLimit);
  keep_alive_ = true;
  response_complete_ = false;
  extra_headers_.clear();
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
    return router_.RefuseUnread(parser_->get(), framing,
                                framing.code() == absl::StatusCode::kUnimplemented
                                    ? ToHttpError(framing)
                                    : MakeHttpError(400, std::string(framing.message()),
                                                    "invalid_request_error", "bad_request"),
                                absl::Now());
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
    const std::string why = absl::StrCat("request body is over ", kBodyLimit, " bytes");
    router_.RefuseUnread(parser_->get(), absl::InvalidArgumentError(why),
                         MakeHttpError(413, why, "invalid_request_error", "request_too_large"),
                         absl::Now());
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
  const HttpRouter::Request& req = parser_->get();
  keep_alive_ = req.keep_alive();
  stream_.expires_never();
  router_.Handle(req, absl::Now());
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
  head += extra_headers_;
  if (retry_after.has_value()) absl::StrAppend(&head, "Retry-After: ", *retry_after, "\r\n");
  if (!keep_alive_) head += "Connection: close\r\n";
  head += "\r\n";
  head += body;
  stream_.expires_after(Chrono(kWriteTimeout));
  Write(std::move(head));
  response_complete_ = true;
}

void HttpSession::StartEvents() {
  Write(
      absl::StrCat("HTTP/1.1 200 OK\r\nServer: pagoda\r\nContent-Type: text/event-stream\r\n"
                   "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n",
                   extra_headers_, "\r\n"));
}

void HttpSession::WriteEvent(const std::string& event) { Write(ChunkOf(event)); }

void HttpSession::EndEvents() {
  Write("0\r\n\r\n");
  response_complete_ = true;
  if (!writing_) EndResponse();
}

int64_t HttpSession::UnsentBytes() {
  int64_t unsent = out_bytes_;
  int in_socket = 0;  // written but not yet acknowledged by the peer
  if (ioctl(stream_.socket().native_handle(), SIOCOUTQ, &in_socket) == 0) unsent += in_socket;
  return unsent;
}

ResponseWriter::Post HttpSession::Poster() {
  return
      [self = shared_from_this(), executor = stream_.get_executor()](std::function<void()> task) {
        net::post(executor, [self, task = std::move(task)] { task(); });
      };
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
  router_.OnWritesDone();  // a stream's text held meanwhile may go out now
  if (writing_) return;
  if (response_complete_) EndResponse();
}

void HttpSession::EndResponse() {
  response_complete_ = false;
  router_.OnResponseEnd();
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
                 router_.GenerationIdForLog(), buffer_.size(), kPipelinedLimit);
    return ClientGone();  // aborted as if the peer had left, and the connection closed
  }
  if (ec == net::error::operation_aborted) return;
  ClientGone();  // the peer closed or reset the connection
}

void HttpSession::ClientGone() {
  router_.OnClientGone();  // aborts a generation in flight; its last output still wakes us
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
