// ThreadPool: every index is covered exactly once, back-to-back loops see no stale job, and
// workers that went to sleep (spin 0) or keep spinning are woken for the next loop.
#include "common/thread_pool.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

// Runs `loops` back-to-back ParallelFors over n items and checks each item was visited once
// per loop, by exact counts.
void ExpectExactCover(ThreadPool& pool, int64_t n, int64_t grain, int loops) {
  std::vector<std::atomic<int>> visits(n);
  for (int loop = 0; loop < loops; ++loop) {
    pool.ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
      ASSERT_LE(0, begin);
      ASSERT_LT(begin, end);
      ASSERT_LE(end, n);
      for (int64_t i = begin; i < end; ++i) visits[i].fetch_add(1);
    });
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[i].load(), loops) << "item " << i;
}

TEST(ThreadPoolTest, EveryItemOnceAcrossManyBackToBackLoops) {
  ThreadPool pool(4);
  ExpectExactCover(pool, 1000, 1, 2000);
  ExpectExactCover(pool, 3, 1, 500);   // fewer items than threads
  ExpectExactCover(pool, 7, 100, 50);  // one chunk: runs on the caller
}

TEST(ThreadPoolTest, SleepingWorkersAreWokenForEachLoop) {
  ThreadPool pool(3, std::chrono::microseconds(0));  // workers sleep as soon as they idle
  ExpectExactCover(pool, 64, 1, 300);
  // Let every worker fall asleep, then make sure a new loop still uses all of them.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<std::thread::id> ids(3);
  std::atomic<int> arrived{0};
  pool.ParallelFor(3, 1, [&](int64_t begin, int64_t end) {
    ASSERT_EQ(end, begin + 1);
    ids[begin] = std::this_thread::get_id();
    arrived.fetch_add(1);
    // Each chunk waits for the other two, so three different threads must run them.
    while (arrived.load() < 3) std::this_thread::yield();
  });
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(ids[1], ids[2]);
  EXPECT_NE(ids[0], ids[2]);
}

TEST(ThreadPoolTest, ResultsWrittenByWorkersAreVisibleToTheCaller) {
  ThreadPool pool(2);
  std::vector<int64_t> out(4096);
  for (int loop = 0; loop < 200; ++loop) {
    pool.ParallelFor(static_cast<int64_t>(out.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = i * loop;
    });
    for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) ASSERT_EQ(out[i], i * loop);
  }
}

TEST(ThreadPoolTest, OneThreadAndEmptyLoops) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.num_threads(), 1);
  ExpectExactCover(pool, 10, 1, 3);
  int calls = 0;
  pool.ParallelFor(0, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPoolTest, DestroyedWhileWorkersSleepOrSpin) {
  for (int spin_us : {0, 1000000}) {
    ThreadPool pool(4, std::chrono::microseconds(spin_us));
    ExpectExactCover(pool, 16, 1, 10);
  }  // the destructor must wake and join them either way
}

}  // namespace
}  // namespace pagoda
