// A `pagoda serve` child process for tests: started on ephemeral ports, which it reads
// back from the daemon's log, and stopped with a signal.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pagoda::testing {

class DaemonProcess {
 public:
  // Starts `<bin>/pagoda serve --host 127.0.0.1 --port 0 --metrics-port 0 <args>` and waits
  // until it logs its ports. Fails the test (and returns false) when it does not start.
  bool Start(const std::vector<std::string>& args);
  ~DaemonProcess();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  // The OpenAI-compatible HTTP port when started with --http-port; 0 otherwise.
  int http_port() const { return http_port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Sends `signal` to the daemon.
  void Signal(int signal);
  // Waits for the daemon to exit; its exit code (128 + signal when killed), -1 on timeout.
  int Wait(int timeout_seconds = 60);
  // Everything the daemon logged so far.
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  int port_ = 0;
  int metrics_port_ = 0;
  int http_port_ = 0;
};

// Starts `argv` (argv[0] is the program path) with stdout and stderr sent to files (one
// file when the paths are equal); returns the child's pid, -1 when fork fails.
pid_t SpawnProcess(const std::vector<std::string>& argv, const std::string& out_path,
                   const std::string& err_path);
// Waits for `pid`; its exit code (128 + signal when killed), -1 when it is not our child.
int WaitForExit(pid_t pid);

// GET http://127.0.0.1:<port><path>; empty on failure.
std::string HttpGet(int port, const std::string& path);
// The value of Prometheus sample `name` (labels included, in exposition order) in
// `exposition`; a bare family name without its own sample gives the sum over all its label
// sets (e.g. every tenant). -1 when there is no such sample.
double MetricValue(const std::string& exposition, const std::string& name);

}  // namespace pagoda::testing
