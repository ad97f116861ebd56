// Row softmax of logits with a temperature: probs[r] = softmax(x[r] / temperature), fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

struct SoftmaxParams {
  const void* x = nullptr;  // [rows, x_stride] of dtype
  float* out = nullptr;     // [rows, out_stride] fp32
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t x_stride = 0;
  int64_t out_stride = 0;
  float temperature = 1.f;  // > 0
};

// Queues the op on `stream`; returns the launch error, if any.
cudaError_t LaunchSoftmax(const SoftmaxParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
