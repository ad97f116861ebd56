// The SwiGLU activation: out = silu(gate) * up, elementwise.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

struct SiluMulParams {
  const void* gate = nullptr;  // [rows, gate_stride] of dtype
  const void* up = nullptr;    // [rows, up_stride] of dtype
  void* out = nullptr;         // [rows, out_stride] of dtype
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t gate_stride = 0;
  int64_t up_stride = 0;
  int64_t out_stride = 0;
};

// Queues the op on `stream`; returns the launch error, if any.
cudaError_t LaunchSiluMul(const SiluMulParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
