#include "common/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pagoda {
namespace {

// Tells the core this is a spin-wait loop (eases the sibling hyperthread and the memory bus).
inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, std::chrono::microseconds spin) : spin_(spin) {
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(num_threads - 1);
  for (int i = 0; i + 1 < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  { MutexLock lock(&sleep_mu_); }  // wakes the sleepers
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
  // No worker is active and the job is closed (the previous call waited for both).
  fn_ = &fn;
  n_ = n;
  num_chunks_ = chunks;
  next_chunk_.store(0, std::memory_order_relaxed);
  pending_.store(chunks, std::memory_order_relaxed);
  open_.store(true);
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    MutexLock lock(&sleep_mu_);  // its Unlock wakes the sleepers
  }
  RunChunks();
  // Spin while the others finish their chunks (they started when we did), then yield.
  for (int spins = 0; pending_.load(std::memory_order_acquire) > 0; ++spins) {
    if (spins < 4096) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  // Close the job; a worker that joined before this is counted in active_ and finishes
  // with nothing left to take; one that joins after sees open_ false and leaves.
  open_.store(false);
  while (active_.load() > 0) CpuRelax();
  fn_ = nullptr;
}

void ThreadPool::RunChunks() {
  while (true) {
    const int64_t chunk = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= num_chunks_) return;
    // Chunk c covers [c * n / chunks, (c + 1) * n / chunks).
    (*fn_)(chunk * n_ / num_chunks_, (chunk + 1) * n_ / num_chunks_);
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

uint64_t ThreadPool::WaitForJob(uint64_t seen) {
  // Spin briefly with pause, then keep watching with sched_yield, which hands the core to
  // any other runnable thread (a busy machine loses little), until `spin_` is over.
  const auto spin_until = std::chrono::steady_clock::now() + spin_;
  for (int spins = 0;; ++spins) {
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    if (generation != seen || stop_.load(std::memory_order_relaxed)) return generation;
    if (spins < 256) {
      CpuRelax();
      continue;
    }
    if (std::chrono::steady_clock::now() >= spin_until) break;
    std::this_thread::yield();
  }
  MutexLock lock(&sleep_mu_);
  sleepers_.fetch_add(1);
  // ParallelFor bumps generation_ before it reads sleepers_, so either it sees this sleeper
  // and takes the lock (waking it), or this check sees the new generation.
  sleep_mu_.Await([this, seen] { return generation_.load() != seen || stop_.load(); });
  sleepers_.fetch_sub(1);
  return generation_.load();
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    seen = WaitForJob(seen);
    if (stop_.load()) return;
    active_.fetch_add(1);
    if (open_.load()) RunChunks();
    active_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace pagoda
