#include "kernels/cpu/cpu_rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pagoda::kernels::cpu {
namespace {

// Elementwise work below this many elements per call runs on the calling thread.
constexpr int64_t kMinParallelElems = 1 << 16;

// What every row shares: the per-pair constants of the angle computation.
struct RopeConsts {
  int32_t half = 0;
  float theta_scale = 1.f;
  const float* freq_factors = nullptr;  // [half] or null
  float freq_scale = 1.f;
  float ext_factor = 0.f;
  float mscale = 1.f;  // attn_factor, times YaRN's magnitude correction when it applies
  std::array<float, 2> corr = {0.f, 0.f};
};

// YaRN's blend weight of pair i: 1 below the correction range, 0 above, linear inside.
float YarnRamp(float low, float high, int32_t pair) {
  const float y = (static_cast<float>(pair) - low) / std::max(0.001f, high - low);
  const float clamped_low = 0.f > y ? 0.f : y;
  return 1.f - (1.f < clamped_low ? 1.f : clamped_low);
}

// cos_sin[2i], cos_sin[2i+1] = cos, sin of pair i's angle at `pos` (times the magnitude
// scale), in the order of float operations ggml's rope cache uses.
void AnglesAt(const RopeConsts& c, int32_t pos, float* cos_sin) {
  float theta = static_cast<float>(pos);
  for (int32_t i = 0; i < c.half; ++i) {
    const float extrap = c.freq_factors != nullptr ? theta / c.freq_factors[i] : theta;
    const float interp = c.freq_scale * extrap;
    float angle = interp;
    if (c.ext_factor != 0.f) {
      const float mix = YarnRamp(c.corr[0], c.corr[1], i) * c.ext_factor;
      angle = interp * (1.f - mix) + extrap * mix;
    }
    cos_sin[2 * i] = std::cos(angle) * c.mscale;
    cos_sin[2 * i + 1] = std::sin(angle) * c.mscale;
    theta *= c.theta_scale;
  }
}

// Rotates pair i of each of `heads` heads of `x` by the angle in cos_sin[2i..2i+1]; pair i
// is (2i, 2i+1), or (i, i + half) in NEOX order.
void RotateHeads(float* x, int32_t heads, int32_t head_dim, int32_t half, bool neox,
                 const float* cos_sin) {
  const int32_t step = neox ? 1 : 2;
  const int32_t offset = neox ? half : 1;
  for (int32_t h = 0; h < heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i];
      const float s = cos_sin[2 * i + 1];
      float* a = v + i * step;
      const float x0 = a[0];
      const float x1 = a[offset];
      a[0] = x0 * c - x1 * s;
      a[offset] = x0 * s + x1 * c;
    }
  }
}

}  // namespace

void Rope(const BatchInput& batch, const Tensor& q, const Tensor& k, const RopeParams& p,
          ThreadPool* pool) {
  RopeConsts c;
  c.half = p.rope_dim / 2;
  if (c.half == 0 || q.rows == 0) return;
  c.theta_scale = std::pow(p.freq_base, -2.f / static_cast<float>(p.rope_dim));
  c.freq_factors = p.freq_factors.data != nullptr ? p.freq_factors.row<const float>(0) : nullptr;
  c.freq_scale = p.freq_scale;
  c.ext_factor = p.ext_factor;
  c.mscale = p.attn_factor;
  if (p.ext_factor != 0.f) {
    c.mscale *= 1.f + 0.1f * std::log(1.f / p.freq_scale);
    c.corr = RopeYarnCorrDims(p);
  }
  const int64_t cols = q.cols + k.cols;
  const int64_t grain = std::max<int64_t>(1, kMinParallelElems / std::max<int64_t>(cols, 1));
  pool->ParallelFor(q.rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> cos_sin(2 * static_cast<size_t>(c.half));
    for (int64_t r = begin; r < end; ++r) {
      AnglesAt(c, batch.positions[r], cos_sin.data());
      RotateHeads(q.row<float>(r), p.num_heads, p.head_dim, c.half, p.neox, cos_sin.data());
      RotateHeads(k.row<float>(r), p.num_kv_heads, p.head_dim, c.half, p.neox, cos_sin.data());
    }
  });
}

}  // namespace pagoda::kernels::cpu
