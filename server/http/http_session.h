// One HTTP/1.1 connection, the transport only: reads requests (limits, idle timeout,
// "Expect: 100-continue") and hands each to its HttpRouter, which answers through this
// session as a ResponseWriter; writes queue and go out in order, all on the connection's
// strand (no thread of its own). While a long response is in progress (WatchDisconnect) a
// read stays posted on the socket: the peer closing it ends the connection (the router aborts
// its generation), and so does a peer pipelining more than 8 KiB behind it (never buffered
// without bound). A request whose framing is ambiguous (request_framing.h) is refused before
// its body is read, and its connection closed.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "server/http/http_context.h"
#include "server/http/http_router.h"
#include "server/http/response_writer.h"

namespace pagoda::server::http {

class HttpSession : public std::enable_shared_from_this<HttpSession>, private ResponseWriter {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, std::shared_ptr<HttpContext> context);
  // Starts reading requests (on the session's strand).
  void Run();

 private:
  void DoRead();
  // Answers "Expect: 100-continue", then reads the body.
  void OnHeader(boost::beast::error_code ec);
  void OnRead(boost::beast::error_code ec);

  // ResponseWriter.
  void SetExtraHeaders(std::string lines) override { extra_headers_ = std::move(lines); }
  void CloseAfterResponse() override { keep_alive_ = false; }
  void Respond(int status, const std::string& content_type, const std::string& body,
               std::optional<int64_t> retry_after) override;
  void StartEvents() override;
  void WriteEvent(const std::string& event) override;
  void EndEvents() override;
  bool writing() const override { return writing_; }
  // Also the socket's send queue (SIOCOUTQ).
  int64_t UnsentBytes() override;
  void WatchDisconnect() override;
  void Close() override;
  bool closed() const override { return closed_; }
  Post Poster() override;

  void Write(std::string bytes);
  void OnWrite(boost::beast::error_code ec);
  // The response's last byte is written: read the next request or close.
  void EndResponse();
  void OnWatch(boost::beast::error_code ec, size_t n);
  // The peer left (or misbehaved): the router aborts its generation; the connection closes.
  void ClientGone();

  boost::beast::tcp_stream stream_;
  std::shared_ptr<HttpContext> context_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool keep_alive_ = true;
  std::string extra_headers_;  // header lines of the current response (SetExtraHeaders)
  std::deque<std::string> out_;
  int64_t out_bytes_ = 0;  // the bytes of out_ (queued, or in flight at the front)
  bool writing_ = false;
  bool response_complete_ = false;  // the response's last bytes are queued
  bool watching_ = false;           // a disconnect watch read is posted
  bool next_after_watch_ = false;   // the watch was cancelled to read the next request
  bool closed_ = false;
  HttpRouter router_;  // last: it holds this session as its ResponseWriter
};

}  // namespace pagoda::server::http
