// One HTTP/1.1 connection: reads requests, routes them (the server's RouteSet), and writes
// responses, all on the connection's strand (no thread of its own). A generation is
// submitted to the engine with a GenerationLink; its outputs come back through the
// strand, as one JSON body or as server-sent events (chunked). While a response is in
// progress a read stays posted on the socket: the peer closing it aborts the engine request,
// and so does a peer pipelining more than 8 KiB behind it (never buffered without bound).
// Output the client has not taken beyond SessionOptions::max_unsent_bytes aborts it too.
// A request whose framing is ambiguous (request_framing.h) is refused before its body is
// read, and its connection closed. With keys configured, the OpenAI door's /metrics needs one.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/generation_call.h"
#include "server/http/generation_prep.h"
#include "server/http/http_context.h"
#include "server/http/http_error.h"
#include "server/http/openai_logprobs.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"
#include "server/token_reservation.h"

namespace pagoda::server::http {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, std::shared_ptr<HttpContext> context);
  // Starts reading requests (on the session's strand).
  void Run();

 private:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  // A generation in progress on this connection.
  struct Generation {
    std::shared_ptr<GenerationLink> link;
    engine::RequestHandle handle = 0;
    uint64_t registration = 0;
    bool stream = false;
    bool include_usage = false;
    ApiKind kind = ApiKind::kCompletion;
    std::optional<ResponseFormatter> format;
    // Per sample (choice): text delivered but not yet in a response (streamed, since its
    // last event: deltas that arrive while a write is in flight become one event;
    // non-streamed, all of it), its finish reason once it ended, and whether its last
    // event is out (streamed).
    std::vector<std::string> texts;
    std::vector<engine::FinishReason> reasons;
    std::vector<bool> ended;
    std::vector<ChoiceLogprobs> logprobs;       // per sample, when requested (else empty)
    std::optional<ToolCallStreams> tool_calls;  // streamed chat with tool calls parsed
    // Caller, bucket, counts, metrics and the access log (server/generation_call.h).
    std::shared_ptr<GenerationCall> call;
    bool done = false;     // the engine delivered its last output
    bool aborted = false;  // the client went away (or the unsent cap cut it): engine told
    bool cut = false;      // the unsent cap cut it (its answer, if any, is out)
  };

  void DoRead();
  // Answers "Expect: 100-continue", then reads the body.
  void OnHeader(boost::beast::error_code ec);
  void OnRead(boost::beast::error_code ec);
  // With --cors-allow-origin: sets cors_headers_ for an allowed Origin and answers a
  // preflight (OPTIONS: 204 with the Access-Control-Allow-* headers, or 403 for an origin
  // not allowed). True when it answered.
  bool HandleCors(const Request& req);
  void Route(const Request& req);
  // GET /health: JSON on the OpenAI door, "SERVING\n" / "NOT_SERVING\n" on the probe port.
  void RespondHealth();
  // A generation route: its call exists before anything is checked, so every refusal
  // (draining, method, key, rate, body) is counted and logged like any other request.
  void HandleGeneration(const Request& req, ApiKind kind);
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
  // Streamed: the text held since the last event, as one event.
  void FlushText();
  // Streamed: sample i's held text as one event (none when tool-call parsing holds it all
  // back); with `at_end` its logprobs and held-back text are all taken.
  void WriteText(size_t i, bool at_end);
  // Output not yet taken by the client: held text, queued or in-flight writes, and the
  // socket's send queue (SIOCOUTQ).
  int64_t UnsentBytes();
  // Over SessionOptions::max_unsent_bytes: aborts the engine request, counts it, and closes
  // the connection (after a 429 when no header was sent yet). True when it cut.
  bool CutIfOverUnsentCap();
  void FinishGeneration(const OutputBatch& batch);
  // Streamed: the last events of each sample that ended: the text left, if any, then an
  // event with empty text (completions) or an empty delta (chat) and the finish reason.
  void WriteEndedSamples();

  // A whole response; `close` ends the connection after it.
  void Respond(int status, const std::string& content_type, const std::string& body,
               std::optional<int64_t> retry_after = std::nullopt);
  void RespondError(const HttpError& error);
  void Write(std::string bytes);
  void OnWrite(boost::beast::error_code ec);
  // The response's last byte is written: read the next request or close.
  void EndResponse();
  void WatchDisconnect();
  void OnWatch(boost::beast::error_code ec, size_t n);
  void ClientGone();
  void Close();

  boost::beast::tcp_stream stream_;
  std::shared_ptr<HttpContext> context_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool keep_alive_ = true;
  absl::Time request_start_;  // when the current request was read
  std::string cors_headers_;  // CORS header lines of the current response (HandleCors)
  std::deque<std::string> out_;
  int64_t out_bytes_ = 0;  // the bytes of out_ (queued, or in flight at the front)
  bool writing_ = false;
  bool response_complete_ = false;  // the response's last bytes are queued
  bool watching_ = false;           // a disconnect watch read is posted
  bool next_after_watch_ = false;   // the watch was cancelled to read the next request
  bool closed_ = false;
  std::optional<Generation> gen_;
};

}  // namespace pagoda::server::http
