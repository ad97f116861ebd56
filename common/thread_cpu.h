// The CPU time the calling thread has used, for charging work to whoever asked for it.
#pragma once

#include <time.h>

#include <cstdint>

namespace pagoda {

// Microseconds of CPU the calling thread has run (CLOCK_THREAD_CPUTIME_ID).
inline int64_t ThreadCpuMicros() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000 + t.tv_nsec / 1000;
}

}  // namespace pagoda
