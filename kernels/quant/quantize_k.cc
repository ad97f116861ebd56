// Reference quantizers of the K formats (ggml's quantize_row_q{2..6}_K_ref, the path
// llama-quantize takes without an importance matrix). Each float operation follows ggml's
// order so the bytes agree with ggml's scalar build.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"
#include "kernels/quant/quantize.h"

namespace pagoda::kernels::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Weighted affine fit x ~ scale * L + min (min <= 0) with L in [0, nmax], searching
// nstep + 1 trial scales around nmax / (max - min); ggml's make_qkx2_quants. Returns the
// scale; *neg_min gets -min.
float FitAffine(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min,
                uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *neg_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, static_cast<size_t>(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// Symmetric fit with L in [-nmax, nmax) refined by coordinate descent weighted by x^2;
// ggml's make_q3_quants with do_rmse. L gets the quants offset by nmax.
float FitSymmetricQ3(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        int new_l = NearestInt(x[i] * sl2 / slx);
        new_l = std::max(-nmax, std::min(nmax - 1, new_l));
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Symmetric fit with L in [-nmax, nmax) weighted by x^2, trying 18 scales around
// -nmax / max; ggml's make_qx_quants with rmse_type 1 and no importance weights.
float FitSymmetricQx(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = NearestInt(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Packs 2-bit quants L[0, 256) as Q2_K/Q3_K store them: byte l of each 32-byte group holds
// elements l, l + 32, l + 64, l + 96 of its 128-element half.
template <typename LType>
void Pack2Bit(const LType* L, uint8_t* qs) {
  for (int j = 0; j < kQkK; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
    }
  }
}

// Affine fits of the 8 groups of 32 of a Q4_K/Q5_K super-block with 6-bit scales and
// mins; fills scales, d, dmin and L (quants in [0, nmax]).
void FitK4(const float* x, int nmax, float rmin, int nstep, uint8_t* packed, uint16_t* d_out,
           uint16_t* dmin_out, uint8_t* L) {
  float mins[8], scales[8], weights[32];
  uint8_t Laux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = FitAffine(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f,
                          nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    uint8_t ls = static_cast<uint8_t>(NearestInt(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(NearestInt(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = FloatToHalf(max_scale / 63.f);
  *dmin_out = FloatToHalf(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    ScaleMinK4(j, packed, &sc, &m);
    const float d = HalfToFloat(*d_out) * sc;
    if (d == 0.f) continue;
    const float dm = HalfToFloat(*dmin_out) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = NearestInt((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

}  // namespace

void QuantizeRowQ2_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ2_K*>(vy);
  uint8_t L[kQkK], Laux[16];
  float weights[16], mins[16], scales[16];
  const float q4scale = 15.f;
  for (int64_t i = 0; i < n / kQkK; ++i, x += kQkK) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] =
          FitAffine(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < 16; ++j) {
        y[i].scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
      }
      y[i].d = FloatToHalf(max_scale / q4scale);
    } else {
      for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
      y[i].d = FloatToHalf(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < 16; ++j) {
        y[i].scales[j] |= static_cast<uint8_t>(NearestInt(iscale * mins[j]) << 4);
      }
      y[i].dmin = FloatToHalf(max_min / q4scale);
    } else {
      y[i].dmin = FloatToHalf(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = HalfToFloat(y[i].d) * (y[i].scales[j] & 0xF);
      if (d == 0.f) continue;
      const float dm = HalfToFloat(y[i].dmin) * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    Pack2Bit(L, y[i].qs);
  }
}

void QuantizeRowQ3_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ3_K*>(vy);
  int8_t L[kQkK];
  float scales[16];
  for (int64_t i = 0; i < n / kQkK; ++i, x += kQkK) {
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = FitSymmetricQ3(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, 12);
    if (max_scale != 0.f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int8_t l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
        l = static_cast<int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
        if (j < 8) {
          y[i].scales[j] = l & 0xF;
        } else {
          y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        }
        l = static_cast<int8_t>(l >> 4);
        y[i].scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
      }
      y[i].d = FloatToHalf(1 / iscale);
    } else {
      y[i].d = FloatToHalf(0.f);
    }
    int8_t sc[16];
    UnpackQ3KScales(y[i].scales, sc);
    for (int j = 0; j < 16; ++j) {
      const float d = HalfToFloat(y[i].d) * sc[j];
      if (d == 0.f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
      }
    }
    std::memset(y[i].hmask, 0, kQkK / 8);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < kQkK; ++j) {
      if (L[j] > 3) {
        y[i].hmask[m] |= hm;
        L[j] = static_cast<int8_t>(L[j] - 4);
      }
      if (++m == kQkK / 8) {
        m = 0;
        hm = static_cast<uint8_t>(hm << 1);
      }
    }
    Pack2Bit(L, y[i].qs);
  }
}

void QuantizeRowQ4_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ4_K*>(vy);
  uint8_t L[kQkK];
  for (int64_t i = 0; i < n / kQkK; ++i, x += kQkK) {
    std::memset(y[i].scales, 0, kKScaleSize);
    FitK4(x, 15, -1.f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQkK; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void QuantizeRowQ5_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ5_K*>(vy);
  uint8_t L[kQkK];
  for (int64_t i = 0; i < n / kQkK; ++i, x += kQkK) {
    std::memset(y[i].scales, 0, kKScaleSize);
    FitK4(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, kQkK / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n0 = 0; n0 < kQkK; n0 += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n0 + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[n0 + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
    }
  }
}

void QuantizeRowQ6_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ6_K*>(vy);
  int8_t L[kQkK];
  float scales[16];
  for (int64_t i = 0; i < n / kQkK; ++i, x += kQkK) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = FitSymmetricQx(16, 32, x + 16 * ib, L + 16 * ib);
      const float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = FloatToHalf(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) {
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    }
    for (int j = 0; j < 16; ++j) {
      const float d = HalfToFloat(y[i].d) * y[i].scales[j];
      if (d == 0.f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQkK; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
        const int q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                     ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace pagoda::kernels::quant
