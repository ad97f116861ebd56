#include "common/host_memory.h"

#include <fstream>
#include <string>

namespace pagoda {

int64_t AvailableHostMemory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

}  // namespace pagoda
