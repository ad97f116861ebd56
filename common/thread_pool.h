// A fixed pool of worker threads for data-parallel loops (CPU kernels).
//
// An engine step is a few hundred short loops, a few microseconds to a millisecond each, so
// waking sleeping threads for every loop would cost as much as the work. Workers spin for
// a while (`spin`) after each loop, watching for the next one, and only then sleep on a
// condition variable; chunks are claimed with an atomic counter, not a lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace pagoda {

class ThreadPool {
 public:
  // How long an idle worker spins before it sleeps by default.
  static constexpr std::chrono::microseconds kDefaultSpin{200};

  // Starts `num_threads - 1` workers; the calling thread is the last participant.
  // num_threads <= 0 means one per hardware thread. spin = 0: workers sleep at once.
  explicit ThreadPool(int num_threads, std::chrono::microseconds spin = kDefaultSpin);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Participants in a ParallelFor, the caller included.
  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), at least `grain` items each
  // where n allows, and returns when all are done. Not reentrant; one caller at a time.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();
  // Waits (spinning, then sleeping) until the job generation differs from `seen` or the
  // pool stops; returns the generation seen.
  uint64_t WaitForJob(uint64_t seen);
  // Takes chunks of the current job until none are left.
  void RunChunks();

  const std::chrono::microseconds spin_;
  std::vector<std::thread> workers_;

  // The job. The caller writes these while `open_` is false and no worker is `active_`,
  // then publishes them by setting `open_` and bumping `generation_`.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t num_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int64_t> pending_{0};  // chunks not yet finished
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> open_{false};  // workers may join the current job
  std::atomic<int> active_{0};     // workers inside RunChunks
  std::atomic<bool> stop_{false};

  Mutex sleep_mu_;  // workers sleep on it; every Unlock wakes them to re-check
  std::atomic<int> sleepers_{0};
};

}  // namespace pagoda
