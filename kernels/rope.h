// RoPE parameters as ggml_rope_ext takes them, and the host-side arithmetic every backend
// shares (YaRN's correction range).
#pragma once

#include <array>
#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels {

// What ggml_rope_ext takes. Pair i of a head (i < rope_dim / 2) rotates by
// theta_i = pos * freq_base^(-2i / rope_dim) / freq_factors[i], scaled by freq_scale and
// mixed with YaRN's extrapolation as ggml's CPU rope does; cos and sin are multiplied by
// attn_factor (and by YaRN's magnitude correction when ext_factor != 0).
struct RopeParams {
  int32_t num_heads = 0;     // query heads in q
  int32_t num_kv_heads = 0;  // heads in k
  int32_t head_dim = 0;
  int32_t rope_dim = 0;  // leading dims of each head that rotate (== head_dim usually)
  float freq_base = 10000.f;
  bool neox = false;        // pairs (i, i + rope_dim / 2) instead of adjacent (2i, 2i + 1)
  Tensor freq_factors;      // [1, rope_dim / 2] f32 divisors of theta_i; absent when data is null
  float freq_scale = 1.f;   // 1 / the linear or YaRN scaling factor
  float ext_factor = 0.f;   // YaRN extrapolation mix (0: plain interpolation)
  float attn_factor = 1.f;  // multiplies cos and sin
  float beta_fast = 32.f;   // YaRN correction range, in rotations
  float beta_slow = 1.f;
  int32_t n_ctx_orig = 0;  // the training context YaRN's correction range is computed for
};

// YaRN's correction range [low, high] of pair indices for `p`, exactly as ggml derives it
// (ggml_rope_yarn_corr_dims), computed in float.
std::array<float, 2> RopeYarnCorrDims(const RopeParams& p);

}  // namespace pagoda::kernels
