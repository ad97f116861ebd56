// In-place elementwise sums: x += y (the residual connection) and x[r] += bias (a row
// broadcast: the projection biases).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

struct AddParams {
  void* x = nullptr;        // [rows, x_stride] of dtype, updated in place
  const void* y = nullptr;  // [rows, y_stride] of dtype
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t x_stride = 0;
  int64_t y_stride = 0;
};

// Queues the op on `stream`; returns the launch error, if any.
cudaError_t LaunchAdd(const AddParams& p, cudaStream_t stream);

struct AddBiasParams {
  void* x = nullptr;            // [rows, x_stride] of dtype, updated in place
  const float* bias = nullptr;  // [cols] f32, added to every row
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t x_stride = 0;
};

// Queues the op on `stream`; returns the launch error, if any.
cudaError_t LaunchAddBias(const AddBiasParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
