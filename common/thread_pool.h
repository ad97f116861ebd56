// A fixed pool of worker threads for data-parallel loops (CPU kernels).
#pragma once

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace pagoda {

class ThreadPool {
 public:
  // Starts `num_threads - 1` workers; the calling thread is the last participant.
  // num_threads <= 0 means one per hardware thread.
  explicit ThreadPool(int num_threads);
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
  // Takes chunks of the current job until none are left.
  void RunChunks();

  std::vector<std::thread> workers_;
  Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;  // chunks not yet finished
  int64_t next_chunk_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t num_chunks_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t n_ ABSL_GUARDED_BY(mu_) = 0;
  const std::function<void(int64_t, int64_t)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace pagoda
