// Device-to-host copies of row blocks (logits, ReadF32) that never DMA into pageable
// memory: a destination that is already pinned gets one asynchronous copy; any other goes
// through two pinned staging chunks, the host copying one chunk out while the next is in
// flight.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace pagoda::kernels::cuda {

class HostReader {
 public:
  // Staging chunk size: large enough to keep the copy engine busy, small enough to overlap.
  static constexpr size_t kChunkBytes = size_t{4} << 20;

  HostReader() = default;
  ~HostReader();
  HostReader(const HostReader&) = delete;
  HostReader& operator=(const HostReader&) = delete;

  // Copies `rows` rows of `row_bytes` bytes, `src_pitch` bytes apart on the device, to the
  // contiguous host memory `dst`, after the work already queued on `stream`; returns once
  // `dst` holds them. Internal/ResourceExhausted on a CUDA failure.
  absl::Status Read(void* dst, const void* src, size_t src_pitch, size_t row_bytes, int64_t rows,
                    cudaStream_t stream);

  // Reads that went straight into pinned memory, and reads staged (for tests).
  int64_t direct_reads() const { return direct_reads_; }
  int64_t staged_reads() const { return staged_reads_; }

 private:
  // Allocates the staging chunks and their events on first use.
  absl::Status EnsureStaging();
  // Queues the copy of rows [first, first + count) into staging chunk `slot`.
  absl::Status QueueChunk(int slot, const void* src, size_t src_pitch, size_t row_bytes,
                          int64_t first, int64_t count, cudaStream_t stream);

  char* staging_[2] = {nullptr, nullptr};
  cudaEvent_t landed_[2] = {nullptr, nullptr};
  int64_t direct_reads_ = 0;
  int64_t staged_reads_ = 0;
};

// True when `p` is page-locked host memory the device can copy into directly.
bool IsPinnedHost(const void* p);

}  // namespace pagoda::kernels::cuda
