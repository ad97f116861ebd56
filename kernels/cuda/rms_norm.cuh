// RMSNorm over the rows of a matrix: out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

struct RmsNormParams {
  const void* x = nullptr;       // [rows, x_stride] of dtype
  const void* weight = nullptr;  // [cols] of dtype
  void* out = nullptr;           // [rows, out_stride] of dtype; may alias x
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t x_stride = 0;
  int64_t out_stride = 0;
  float eps = 1e-5f;
};

// Queues the op on `stream`; returns the launch error, if any.
cudaError_t LaunchRmsNorm(const RmsNormParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
