// The seam between an HTTP/1.1 connection (HttpSession: socket, framing, keep-alive) and what
// answers its requests (HttpRouter, GenerationResponse): one response per request, either
// whole (Respond) or as server-sent events (StartEvents, WriteEvent..., EndEvents). All of it
// is called on the connection's strand, except the function Poster() returns.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "server/http/http_error.h"

namespace pagoda::server::http {

class ResponseWriter {
 public:
  // Runs a task on the connection's strand, later (never inline); callable from any thread.
  // A pending task keeps the connection, and so what it owns (its router), alive.
  using Post = std::function<void(std::function<void()>)>;

  virtual ~ResponseWriter() = default;

  // Header lines (CRLF-terminated, e.g. CORS) every response to the current request carries;
  // "" until set, and again once the next request is read.
  virtual void SetExtraHeaders(std::string lines) = 0;
  // The connection ends after the current response ("Connection: close").
  virtual void CloseAfterResponse() = 0;

  // A whole response: `body` as `content_type` (a 204 has neither), with Retry-After when
  // given. Its last byte written, the connection reads the next request or closes.
  virtual void Respond(int status, const std::string& content_type, const std::string& body,
                       std::optional<int64_t> retry_after = std::nullopt) = 0;
  void RespondError(const HttpError& error) {
    Respond(error.status, "application/json", error.body, error.retry_after_s);
  }

  // A 200 text/event-stream response (chunked) begins; `event`s follow (each one chunk, as
  // given), and EndEvents ends it (the last chunk) and so the response.
  virtual void StartEvents() = 0;
  virtual void WriteEvent(const std::string& event) = 0;
  virtual void EndEvents() = 0;

  // A write is in flight (what is written now queues behind it); the owner's
  // OnWritesDone() runs once the queue drains.
  virtual bool writing() const = 0;
  // Bytes written but not yet taken by the client: queued, in flight, and in the socket's
  // send queue.
  virtual int64_t UnsentBytes() = 0;
  // While a long response is in progress: the peer leaving (or pipelining too much behind
  // it) ends the connection and calls the owner's OnClientGone().
  virtual void WatchDisconnect() = 0;
  // Ends the connection now; nothing more is written.
  virtual void Close() = 0;
  virtual bool closed() const = 0;

  virtual Post Poster() = 0;
};

}  // namespace pagoda::server::http
