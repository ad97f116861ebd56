// The daemon's HTTP/1.1 server: one acceptor and a small fixed pool of threads running an
// event loop (Boost.Asio); connections are state machines on strands, never a thread each,
// so thousands of open streams (or idle peers) cost sockets and buffers, not threads.
// SessionOptions::routes picks what it serves: the OpenAI-compatible door (--http-port) or
// only the probes /health and /metrics (--metrics-port). Routes: docs/API.md ("HTTP").
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/http/http_context.h"

namespace pagoda::server::http {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;         // 0 = pick a free port
  int num_threads = 2;  // event-loop threads (>= 1)
  // Threads that parse request bodies, render chat templates and tokenize, off the event
  // loop (>= 1); the OpenAI door only.
  int num_prepare_threads = 2;
  SessionOptions session;  // routes, idle timeout, unsent-bytes cap
};

class HttpServer {
 public:
  // Binds and starts serving; Unavailable when it cannot listen.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpDeps deps);
  // Stops: generations still in flight are aborted, connections closed, threads joined.
  ~HttpServer();

  int port() const { return port_; }
  // From now on new requests get 503 (health too) and connections close after their
  // response; generations in flight continue.
  void StartDraining();
  // Waits for the generations in flight to finish until `deadline`, then aborts the rest;
  // returns how many were cut off.
  int64_t Drain(absl::Time deadline);
  // Generations in flight.
  int64_t in_flight() const { return context_->in_flight(); }

 private:
  struct Io;
  HttpServer() = default;
  void Accept();

  std::unique_ptr<Io> io_;
  std::shared_ptr<HttpContext> context_;
  std::vector<std::thread> threads_;
  int port_ = 0;
};

}  // namespace pagoda::server::http
