// `pagoda serve`: the gRPC daemon. SIGTERM or SIGINT drains it gracefully and exits 0.
#include <csignal>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "server/server.h"
#include "spdlog/spdlog.h"
#include "tools/commands.h"
#include "model/make_model.h"
#include "tools/engine_flags.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "address to listen on");
ABSL_FLAG(int32_t, port, 50051, "gRPC port; 0 picks a free one (logged)");
ABSL_FLAG(int32_t, metrics_port, 9090,
          "Prometheus /metrics port; 0 picks a free one (logged), -1 disables it");
ABSL_FLAG(int32_t, max_queued_requests, 1024,
          "requests waiting to run at most; beyond it new requests get RESOURCE_EXHAUSTED");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "on SIGTERM/SIGINT, how long in-flight streams may run before being cut off");
ABSL_FLAG(absl::Duration, stall_timeout, absl::Seconds(30),
          "health reads NOT_SERVING when the engine has work but made no step for this long");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn or error");

namespace pagoda::tools {

int RunServe(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "pagoda serve [--model PATH] [--host H] [--port P] ...\n"
      "Serves streaming completions over gRPC.");
  absl::ParseCommandLine(argc, argv);
  spdlog::set_level(spdlog::level::from_str(absl::GetFlag(FLAGS_log_level)));

  // Signals are taken synchronously by this thread alone: block them before any other
  // thread starts, so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  engine::EngineConfig base;
  base.max_queued_requests = absl::GetFlag(FLAGS_max_queued_requests);
  auto engine = StartEngineFromFlags(base);
  if (!engine.ok()) {
    spdlog::error("cannot start the engine: {}", std::string(engine.status().message()));
    return 1;
  }
  const std::string model = absl::GetFlag(FLAGS_model);
  server::ServerOptions options{.host = absl::GetFlag(FLAGS_host),
                                .port = absl::GetFlag(FLAGS_port),
                                .metrics_port = absl::GetFlag(FLAGS_metrics_port),
                                .model_name = model.empty() ? model::kBuiltinModelName : model,
                                .drain_timeout = absl::GetFlag(FLAGS_drain_timeout),
                                .stall_timeout = absl::GetFlag(FLAGS_stall_timeout)};
  auto server = server::Server::Start(options, engine->get());
  if (!server.ok()) {
    spdlog::error("cannot start the server: {}", std::string(server.status().message()));
    return 1;
  }
  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("received {}: draining", signal == SIGTERM ? "SIGTERM" : "SIGINT");
  const int64_t cut = (*server)->Drain();
  server->reset();
  (*engine)->Stop();
  spdlog::info("stopped ({} streams cut off)", cut);
  return 0;
}

}  // namespace pagoda::tools
