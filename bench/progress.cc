#include "bench/progress.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "bench/request_record.h"

namespace pagoda::bench {

ProgressReporter::ProgressReporter(std::FILE* out, bool interactive, std::string label, int total)
    : out_(out), interactive_(interactive), label_(std::move(label)), total_(total) {}

ProgressReporter::~ProgressReporter() { Stop(); }

void ProgressReporter::Start() {
  start_ = NowSeconds();
  thread_ = std::thread([this] { Loop(); });
}

void ProgressReporter::OnRequestDone(bool ok) {
  done_.fetch_add(1, std::memory_order_relaxed);
  if (!ok) errors_.fetch_add(1, std::memory_order_relaxed);
}

void ProgressReporter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !thread_.joinable()) return;
    stopping_ = true;
    cv_.notify_all();  // under the lock, as every notify in pagoda
  }
  thread_.join();
  Print(/*final=*/true);
}

std::string ProgressReporter::Line(int done, int total, double elapsed_s, int errors) {
  const double rate = elapsed_s > 0 ? done / elapsed_s : 0.0;
  return absl::StrFormat("%d/%d done, %.1f req/s, %d error%s", done, total, rate, errors,
                         errors == 1 ? "" : "s");
}

void ProgressReporter::Loop() {
  // A terminal line is cheap to redraw; a log gets a line every 5 seconds.
  const auto period = interactive_ ? std::chrono::milliseconds(250) : std::chrono::seconds(5);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    Print(/*final=*/false);
    lock.lock();
  }
}

void ProgressReporter::Print(bool final) {
  const std::string line = Line(done_.load(), total_, NowSeconds() - start_, errors_.load());
  if (interactive_) {
    // Pad so a shorter line fully covers the one before it.
    absl::FPrintF(out_, "\r[%s] %-60s%s", label_, line, final ? "\n" : "");
  } else {
    absl::FPrintF(out_, "[%s] %s\n", label_, line);
  }
  std::fflush(out_);
}

}  // namespace pagoda::bench
