#include "common/thread_pool.h"

#include <algorithm>

namespace pagoda {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(num_threads - 1);
  for (int i = 0; i + 1 < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t chunks = std::min<int64_t>(max_chunks, num_threads());
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  {
    MutexLock lock(&mu_);
    fn_ = &fn;
    n_ = n;
    num_chunks_ = chunks;
    next_chunk_ = 0;
    pending_ = chunks;
    ++generation_;
  }
  RunChunks();
  MutexLock lock(&mu_);
  mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::RunChunks() {
  while (true) {
    int64_t chunk, chunks, n;
    const std::function<void(int64_t, int64_t)>* fn;
    {
      MutexLock lock(&mu_);
      if (fn_ == nullptr || next_chunk_ >= num_chunks_) return;
      chunk = next_chunk_++;
      chunks = num_chunks_;
      n = n_;
      fn = fn_;
    }
    // Chunk c covers [c * n / chunks, (c + 1) * n / chunks).
    (*fn)(chunk * n / chunks, (chunk + 1) * n / chunks);
    MutexLock lock(&mu_);
    --pending_;
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    {
      MutexLock lock(&mu_);
      auto ready = [this, &seen]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || generation_ != seen; };
      mu_.Await(ready);
      if (stop_) return;
      seen = generation_;
    }
    RunChunks();
  }
}

}  // namespace pagoda
