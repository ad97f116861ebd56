#include "bench/soak_util.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "httplib.h"

namespace pagoda::bench {

Timers::Timers() : thread_([this] { Loop(); }) {}

Timers::~Timers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void Timers::After(double seconds, std::function<void()> fn) {
  const auto due = std::chrono::steady_clock::now() +
                   std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push({due, next_order_++, std::move(fn)});
  cv_.notify_all();
}

void Timers::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (queue_.empty()) {
      if (stop_) return;
      cv_.wait(lock);
      continue;
    }
    const auto due = queue_.top().due;
    if (std::chrono::steady_clock::now() < due) {
      cv_.wait_until(lock, due);
      continue;
    }
    std::function<void()> fn = queue_.top().fn;
    queue_.pop();
    lock.unlock();
    fn();
    lock.lock();
  }
}

std::optional<int64_t> ReadRssKb(int64_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    rest = absl::StripAsciiWhitespace(absl::StripSuffix(absl::StripAsciiWhitespace(rest), "kB"));
    int64_t kb = 0;
    if (absl::SimpleAtoi(rest, &kb)) return kb;
  }
  return std::nullopt;
}

std::string FetchMetrics(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return "";
  int port = 0;
  if (!absl::SimpleAtoi(host_port.substr(colon + 1), &port)) return "";
  httplib::Client client(host_port.substr(0, colon), port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  auto response = client.Get("/metrics");
  if (!response || response->status != 200) return "";
  return response->body;
}

double MetricValue(const std::string& metrics, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::ConsumePrefix(&line, name) || !absl::ConsumePrefix(&line, " ")) continue;
    double v = 0;
    if (absl::SimpleAtod(line, &v)) return v;
  }
  return -1;
}

bool WaitPoolFull(const std::string& host_port, double timeout_s) {
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  while (std::chrono::steady_clock::now() < give_up) {
    const std::string m = FetchMetrics(host_port);
    const double total = MetricValue(m, "pagoda:kv_cache_total_blocks");
    if (total > 0 && MetricValue(m, "pagoda:kv_cache_free_blocks") == total &&
        MetricValue(m, "pagoda:num_requests_running") == 0 &&
        MetricValue(m, "pagoda:num_requests_waiting") == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace pagoda::bench
