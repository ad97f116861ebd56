// A progress line while a run is going: rewritten in place ("\r") on a terminal, a plain
// line every few seconds otherwise (logs, CI).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace pagoda::bench {

class ProgressReporter {
 public:
  // Writes to `out` (stderr in the binary); `interactive` picks the "\r" style. `label`
  // prefixes each line ("warmup", "bench").
  ProgressReporter(std::FILE* out, bool interactive, std::string label, int total);
  ~ProgressReporter();  // calls Stop()

  // Starts the printing thread; the rate is measured from here.
  void Start();
  // Counts one finished request. Thread-safe.
  void OnRequestDone(bool ok);
  // Prints the final line and joins the thread; idempotent.
  void Stop();

  // "37/100 done, 12.3 req/s, 2 errors": the line's text for these counts.
  static std::string Line(int done, int total, double elapsed_s, int errors);

 private:
  void Loop();
  void Print(bool final);

  std::FILE* out_;
  const bool interactive_;
  const std::string label_;
  const int total_;
  std::atomic<int> done_{0};
  std::atomic<int> errors_{0};
  double start_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace pagoda::bench
