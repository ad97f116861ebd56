// A StepObserver that holds the engine thread at the end of each step while closed, so a
// stream stays in flight for as long as a test needs (no sleeps, no timing).
#pragma once

#include "common/mutex.h"
#include "engine/engine.h"

namespace pagoda::testing {

class StepGate final : public engine::StepObserver {
 public:
  void OnStep(const engine::StepTiming&) override {
    MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_; });
  }
  // Closed: the next step end blocks until the gate is opened again.
  void Set(bool open) {
    MutexLock lock(&mu_);
    open_ = open;
  }

 private:
  Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace pagoda::testing
