// Host-side helpers of the CUDA backend: error conversion and grow-only device buffers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace pagoda::kernels::cuda {

// OK for cudaSuccess; otherwise ResourceExhausted (out of memory) or Internal naming `what`.
absl::Status CudaStatus(cudaError_t err, const char* what);

// Device memory that only grows, for per-step scratch (split-KV partials, conversions).
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  // Makes room for `bytes`. Growing waits for `stream` first (queued work may still read
  // the old memory). ResourceExhausted when the device is out of memory.
  absl::Status Reserve(size_t bytes, cudaStream_t stream);
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// A device buffer with a pinned host twin for small per-step uploads (batch metadata,
// plans): fill host(), then Upload() queues one asynchronous copy.
class UploadBuffer {
 public:
  UploadBuffer() = default;
  ~UploadBuffer();
  UploadBuffer(const UploadBuffer&) = delete;
  UploadBuffer& operator=(const UploadBuffer&) = delete;

  // Makes room for `bytes` and waits until the previous upload has left host() (so it can
  // be refilled). Growing also waits for `stream`.
  absl::Status Reserve(size_t bytes, cudaStream_t stream);
  // Queues the copy of the first `bytes` of host() to device() on `stream`.
  absl::Status Upload(size_t bytes, cudaStream_t stream);
  char* host() const { return host_; }
  char* device() const { return device_; }

 private:
  char* host_ = nullptr;
  char* device_ = nullptr;
  size_t capacity_ = 0;
  cudaEvent_t copied_ = nullptr;
};

}  // namespace pagoda::kernels::cuda
