#include "bench/load_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

namespace pagoda::bench {
namespace {

std::chrono::steady_clock::time_point ToTimePoint(double seconds) {
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(seconds)));
}

// Shared with the completion callbacks, which may run after RunLoad's locals are gone
// were they captured by reference.
struct InFlight {
  std::mutex mu;
  std::condition_variable cv;
  int open = 0;
  int finished = 0;
};

}  // namespace

LoadRun RunLoad(const StartCallFn& start, const std::vector<v1::GenerateRequest>& requests,
                const LoadOptions& options, ProgressReporter* progress) {
  LoadRun run;
  run.records.resize(requests.size());  // sized once: callbacks hold pointers into it
  auto state = std::make_shared<InFlight>();
  const int limit = options.concurrency > 0 ? options.concurrency : std::numeric_limits<int>::max();
  run.start_time = NowSeconds();
  const bool bounded = options.duration_s > 0;
  const double stop_at = run.start_time + options.duration_s;
  int sent = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (i < options.send_offsets.size()) {
      double at = run.start_time + options.send_offsets[i];
      if (bounded) at = std::min(at, stop_at);
      std::this_thread::sleep_until(ToTimePoint(at));
    }
    {
      std::unique_lock<std::mutex> lock(state->mu);
      const auto has_slot = [&] { return state->open < limit; };
      if (bounded) {
        state->cv.wait_until(lock, ToTimePoint(stop_at), has_slot);
      } else {
        state->cv.wait(lock, has_slot);
      }
      if (bounded && NowSeconds() >= stop_at) break;
      ++state->open;
      run.peak_in_flight = std::max(run.peak_in_flight, state->open);
    }
    RequestRecord* record = &run.records[i];
    record->send_time = NowSeconds();
    ++sent;
    start(options.call, requests[i], record, [state, record, progress] {
      if (progress != nullptr) progress->OnRequestDone(record->status == "OK");
      std::lock_guard<std::mutex> lock(state->mu);
      --state->open;
      ++state->finished;
      state->cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(state->mu);
    state->cv.wait(lock, [&] { return state->finished == sent; });
  }
  run.end_time = NowSeconds();
  run.records.resize(sent);
  return run;
}

}  // namespace pagoda::bench
