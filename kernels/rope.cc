#include "kernels/rope.h"

#include <cmath>
#include <numbers>

namespace pagoda::kernels {
namespace {

// The (fractional) pair index whose wavelength makes `rotations` turns over n_ctx_orig
// positions, in float as ggml computes it.
float CorrDim(int32_t n_dims, int32_t n_ctx_orig, float rotations, float base) {
  const float ratio =
      static_cast<float>(n_ctx_orig) / (rotations * 2.f * static_cast<float>(std::numbers::pi));
  return static_cast<float>(n_dims) * std::log(ratio) / (2.f * std::log(base));
}

}  // namespace

std::array<float, 2> RopeYarnCorrDims(const RopeParams& p) {
  const float low = std::floor(CorrDim(p.rope_dim, p.n_ctx_orig, p.beta_fast, p.freq_base));
  const float high = std::ceil(CorrDim(p.rope_dim, p.n_ctx_orig, p.beta_slow, p.freq_base));
  const float last = static_cast<float>(p.rope_dim - 1);
  return {0.f > low ? 0.f : low, last < high ? last : high};
}

}  // namespace pagoda::kernels
