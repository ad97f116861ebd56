#include "tests/daemon_process.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda::testing {

bool DaemonProcess::Start(const std::vector<std::string>& args) {
  log_path_ = MakeTempDir() + "/daemon.log";
  std::vector<std::string> argv = {
      BinDir() + "/pagoda", "serve", "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = SpawnProcess(argv, log_path_, log_path_);
  const std::regex ready(R"(serving on [0-9.]+:(\d+) \(metrics on port (\d+)\))");
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    std::smatch m;
    const std::string log = Log();
    if (std::regex_search(log, m, ready)) {
      port_ = std::stoi(m[1]);
      metrics_port_ = std::stoi(m[2]);
      // The HTTP door (--http-port) logs its port before the line above.
      const std::regex http(R"(OpenAI-compatible HTTP on [0-9.]+:(\d+))");
      if (std::regex_search(log, m, http)) http_port_ = std::stoi(m[1]);
      return true;
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      ADD_FAILURE() << "daemon exited at start:\n" << log;
      return false;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ADD_FAILURE() << "daemon did not start:\n" << Log();
  return false;
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void DaemonProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

int DaemonProcess::Wait(int timeout_seconds) {
  const absl::Time deadline = absl::Now() + absl::Seconds(timeout_seconds);
  while (pid_ > 0 && absl::Now() < deadline) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return -1;
}

std::string DaemonProcess::Log() const { return ReadFileOrDie(log_path_); }

pid_t SpawnProcess(const std::vector<std::string>& argv, const std::string& out_path,
                   const std::string& err_path) {
  // Everything the child needs is prepared before fork: the parent has threads, so the
  // child may only make async-signal-safe calls.
  std::vector<char*> cargs;
  for (const std::string& a : argv) cargs.push_back(const_cast<char*>(a.c_str()));
  cargs.push_back(nullptr);
  const bool one_file = out_path == err_path;
  close(open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int out = open(out_path.c_str(), O_WRONLY | O_APPEND);
  const int err = one_file ? out : open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(out, STDOUT_FILENO);
  dup2(err, STDERR_FILENO);
  execv(cargs[0], cargs.data());
  _exit(127);
}

int WaitForExit(pid_t pid) {
  int status = 0;
  if (pid <= 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string HttpGet(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get(path.c_str());
  return res ? res->body : "";
}

double MetricValue(const std::string& exposition, const std::string& name) {
  const bool family = name.find('{') == std::string::npos;
  double sum = 0;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    double v;
    if (parts.size() != 2 || !absl::SimpleAtod(parts[1], &v)) continue;
    if (parts[0] == name) return v;
    if (family && absl::StartsWith(parts[0], name + "{")) {
      sum += v;
      found = true;
    }
  }
  return found ? sum : -1;
}

}  // namespace pagoda::testing
