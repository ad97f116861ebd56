// Small pieces of pagoda-soak: a timer thread, the daemon's RSS and its /metrics.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <vector>

namespace pagoda::bench {

// Runs callbacks after a delay, in order of their due time, on one thread of its own.
class Timers {
 public:
  Timers();
  // Runs the callbacks still due, then stops.
  ~Timers();
  // Runs `fn` on the timer thread in `seconds` (>= 0).
  void After(double seconds, std::function<void()> fn);

 private:
  struct Entry {
    std::chrono::steady_clock::time_point due;
    uint64_t order;
    std::function<void()> fn;
    bool operator>(const Entry& o) const { return due != o.due ? due > o.due : order > o.order; }
  };
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  uint64_t next_order_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// VmRSS of process `pid` in KiB (from /proc/PID/status); nullopt when unreadable or pid 0.
std::optional<int64_t> ReadRssKb(int64_t pid);
// The text of http://HOST:PORT/metrics; empty when unreachable.
std::string FetchMetrics(const std::string& host_port);
// The value of the first sample named exactly `name` (labels included, if given); -1 when
// missing.
double MetricValue(const std::string& metrics, const std::string& name);
// Polls /metrics until nothing runs or waits and every KV block is free; false after
// `timeout_s`.
bool WaitPoolFull(const std::string& host_port, double timeout_s);

}  // namespace pagoda::bench
