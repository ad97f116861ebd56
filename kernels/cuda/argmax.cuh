// Greedy sampling: the index of the largest element of each row (the first one on ties).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

struct ArgmaxParams {
  const void* x = nullptr;  // [rows, stride] of dtype
  int32_t* out = nullptr;   // [rows] device memory
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t stride = 0;
};

// Queues the op on `stream`; returns the launch error, if any. NaN elements are skipped.
cudaError_t LaunchArgmax(const ArgmaxParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
