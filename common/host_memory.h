// How much host memory the machine can still give (Linux: /proc/meminfo's MemAvailable), for
// sizing host-side buffers such as the swap space.
#pragma once

#include <cstdint>

namespace pagoda {

// Bytes of host memory available to new allocations without swapping; -1 when unknown.
int64_t AvailableHostMemory();

}  // namespace pagoda
