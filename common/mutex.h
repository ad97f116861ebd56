// Mutex with absl::Mutex-style conditional waits, built on std::mutex and
// std::condition_variable. Debian's abseil is not built with ThreadSanitizer, so absl::Mutex
// hides its happens-before edges from TSan and every guarded access looks like a race;
// pthread-based primitives are intercepted by TSan, so this one keeps `make tsan` meaningful.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace pagoda {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes every waiter, which re-checks its condition (as absl::Mutex does), and unlocks.
  // The notify comes first, under the lock: a waiter whose condition holds may return and
  // destroy this Mutex (a Notification on its stack) as soon as the lock is free.
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    cv_.notify_all();
    mu_.unlock();
  }
  // Blocks until `condition()` holds. Precondition: held; the condition runs under the lock.
  template <typename Condition>
  void Await(Condition condition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    cv_.wait(lock, condition);
    lock.release();
  }
  // Like Await, giving up after `timeout`; returns whether the condition holds.
  template <typename Condition>
  bool AwaitWithTimeout(Condition condition, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    const bool result = cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), condition);
    lock.release();
    return result;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

// A one-shot event: Notify() once, any number of waiters.
class Notification {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
  }
  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }
  void WaitForNotification() const {
    MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_; });
  }
  // Returns whether the notification came within `timeout`.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_; },
                                timeout);
  }

 private:
  mutable Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pagoda
