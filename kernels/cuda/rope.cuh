// Rotary position embedding of q and k in place, as ggml's CPU rope computes it: pair i of
// the first rope_dim elements of every head, (2i, 2i+1) or in NEOX order (i, i + rope_dim/2),
// rotates by pos * theta_scale^i, divided by freq_factors[i], scaled by freq_scale and
// blended with YaRN's extrapolation when ext_factor != 0; cos and sin carry mscale.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

struct RopeLaunchParams {
  void* q = nullptr;                    // [rows, q_stride] of dtype: num_heads heads of head_dim
  void* k = nullptr;                    // [rows, k_stride] of dtype: num_kv_heads heads
  const int32_t* positions = nullptr;   // [rows] position of each row's token
  const float* freq_factors = nullptr;  // [rope_dim / 2] device f32, or null
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t q_stride = 0;
  int64_t k_stride = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t rope_dim = 0;     // even, <= head_dim
  bool neox = false;        // NEOX pair order
  float theta_scale = 1.f;  // freq_base^(-2 / rope_dim), computed on the host
  float freq_scale = 1.f;
  float ext_factor = 0.f;
  float mscale = 1.f;                     // attn_factor times YaRN's magnitude correction
  float corr_low = 0.f, corr_high = 0.f;  // YaRN's correction range (RopeYarnCorrDims)
};

// Queues the op on `stream`; returns the launch error, if any.
cudaError_t LaunchRope(const RopeLaunchParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
