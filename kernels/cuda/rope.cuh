// Rotary position embedding of q and k in place, rotating adjacent pairs (2i, 2i+1) of the
// first rope_dim elements of every head by pos * freq_base^(-2i / rope_dim).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

struct RopeLaunchParams {
  void* q = nullptr;                   // [rows, q_stride] of dtype: num_heads heads of head_dim
  void* k = nullptr;                   // [rows, k_stride] of dtype: num_kv_heads heads
  const int32_t* positions = nullptr;  // [rows] position of each row's token
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t q_stride = 0;
  int64_t k_stride = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t rope_dim = 0;     // even, <= head_dim
  float theta_scale = 1.f;  // freq_base^(-2 / rope_dim), computed on the host
};

// Queues the op on `stream`; returns the launch error, if any.
cudaError_t LaunchRope(const RopeLaunchParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
