// AVX2 kernels of VecDotRows (vec_dot_rows.h): compiled for AVX2 + FMA + F16C and reached
// only after CpuHasAvx2(). Each kernel is the single-row kernel of vec_dot_avx2.cc with the
// loop over activation rows moved inside the loop over blocks: a block's quants and scales
// are unpacked once, then every row takes its exact integer lane sums and its own fused
// multiply-adds in the single-row order, so each result keeps the single-row bits.
#pragma GCC target("avx2,fma,f16c")

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/quant/avx2_lanes.h"
#include "kernels/quant/quant_types.h"
#include "kernels/quant/vec_dot_rows.h"

namespace pagoda::kernels::quant {
namespace {

// acc + the int32 lane sums of (16-bit pair sums of u * s) times `scales`, exactly (the pair
// sums never saturate for the operands the kernels pass).
inline __m256i AddScaled(__m256i acc, __m256i scales, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(scales, _mm256_maddubs_epi16(u, s)));
}

// Block i of activation row r.
template <typename Y>
struct ActRows {
  const uint8_t* base;
  size_t stride;
  const Y& At(int r, int64_t i) const { return As<Y>(base + r * stride)[i]; }
};

// Q8_0 (kNibbles false) and Q4_0 weights against Q8_0 activations.
template <int R, bool kNibbles, typename Block>
void RowsQx_0(const Block* x, ActRows<BlockQ8_0> y, int64_t nb, float* out, int64_t os) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i q;
    if constexpr (kNibbles) {
      q = _mm256_sub_epi8(Nibbles(x[i].qs), _mm256_set1_epi8(8));
    } else {
      q = Load32(x[i].qs);
    }
    // LaneSumsSigned(q, y) with |q| computed once for all rows.
    const __m256i abs_q = _mm256_sign_epi8(q, q);
    const float xd = H(x[i].d);
    for (int r = 0; r < R; ++r) {
      const BlockQ8_0& b = y.At(r, i);
      const __m256i sums = LaneSumsUnsigned(abs_q, _mm256_sign_epi8(Load32(b.qs), q));
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(xd * H(b.d)), _mm256_cvtepi32_ps(sums), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * os] = HorizontalSum(acc[r]);
}

// The min products of a Q4_K/Q5_K block with one activation block, as four int32 lanes:
// lane k = m[2k] * g[2k] + m[2k+1] * g[2k+1], g[t] = bsums[2t] + bsums[2t+1]
// (MinProducts in vec_dot_avx2.cc; exact). `mins16` holds m[t] in 16-bit lanes 2t, 2t+1.
inline __m128i MinProducts4(const BlockQ8_K& b, __m256i mins16) {
  const __m256i prod = _mm256_madd_epi16(Load32(b.bsums), mins16);
  return _mm_hadd_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
}

// Shuffle control for _mm256_shuffle_epi8 that fills the low 128-bit lane with 16-bit word
// `lo` of that lane and the high lane with word `hi` of that lane.
inline __m256i WordBroadcast(int lo, int hi) {
  const int16_t a = static_cast<int16_t>((2 * lo) | ((2 * lo + 1) << 8));
  const int16_t b = static_cast<int16_t>((2 * hi) | ((2 * hi + 1) << 8));
  return _mm256_set_m128i(_mm_set1_epi16(b), _mm_set1_epi16(a));
}

// A Q4_K/Q5_K block's eight 6-bit scales and mins (ScaleMinK4 for j = 0..7, unpacked with
// word operations): scales16 holds scale j in 16-bit lane j of both 128-bit lanes, mins16
// holds min t in 16-bit lanes 2t and 2t + 1 (the layout MinProducts4 wants).
struct ScalesMinsK4 {
  __m256i scales16;
  __m256i mins16;
};
inline ScalesMinsK4 UnpackScalesMinsK4(const uint8_t* packed) {
  uint32_t u[4];
  std::memcpy(u, packed, 12);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);  // mins 4..7
  const uint32_t mins_low = u[1] & kLow6;                       // mins 0..3
  u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);         // scales 4..7
  u[2] = mins_low;
  u[0] &= kLow6;  // scales 0..3
  const __m128i bytes = _mm_setr_epi32(static_cast<int>(u[0]), static_cast<int>(u[1]),
                                       static_cast<int>(u[2]), static_cast<int>(u[3]));
  const __m128i scales = _mm_cvtepu8_epi16(bytes);
  const __m128i mins = _mm_unpackhi_epi8(bytes, bytes);  // m0 m0 m1 m1 ... m7 m7
  return {_mm256_set_m128i(scales, scales), _mm256_cvtepu8_epi16(mins)};
}

// Q4_K (kFifth false) and Q5_K weights against Q8_K activations.
template <int R, bool kFifth, typename Block>
void RowsQxK(const Block* x, ActRows<BlockQ8_K> y, int64_t nb, float* out, int64_t os) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc[R];
  __m128 acc_m[R];  // Q4_K: four min accumulators per row
  float summs[R];   // Q5_K: one
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    acc_m[r] = _mm_setzero_ps();
    summs[r] = 0;
  }
  for (int64_t i = 0; i < nb; ++i) {
    const ScalesMinsK4 sm = UnpackScalesMinsK4(x[i].scales);
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kFifth) hbits = Load32(x[i].qh);
    __m256i sumi[R];
    for (int r = 0; r < R; ++r) sumi[r] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i bits = Load32(x[i].qs + 32 * j);
      __m256i lo = _mm256_and_si256(bits, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
      if constexpr (kFifth) {
        lo = _mm256_or_si256(
            lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one), 4));
        hi = _mm256_or_si256(
            hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one), 4));
      }
      const __m256i s_lo = _mm256_shuffle_epi8(sm.scales16, WordBroadcast(2 * j, 2 * j));
      const __m256i s_hi = _mm256_shuffle_epi8(sm.scales16, WordBroadcast(2 * j + 1, 2 * j + 1));
      for (int r = 0; r < R; ++r) {
        const int8_t* yq = y.At(r, i).qs + 64 * j;
        sumi[r] = AddScaled(sumi[r], s_lo, lo, Load32(yq));
        sumi[r] = AddScaled(sumi[r], s_hi, hi, Load32(yq + 32));
      }
    }
    const float xd = H(x[i].d), xdmin = H(x[i].dmin);
    for (int r = 0; r < R; ++r) {
      const BlockQ8_K& b = y.At(r, i);
      const float d = b.d * xd;
      const float dmin = -b.d * xdmin;
      const __m128i prod = MinProducts4(b, sm.mins16);
      if constexpr (kFifth) {
        const int total = (_mm_extract_epi32(prod, 0) + _mm_extract_epi32(prod, 1)) +
                          (_mm_extract_epi32(prod, 2) + _mm_extract_epi32(prod, 3));
        summs[r] = std::fma(dmin, static_cast<float>(total), summs[r]);
      } else {
        acc_m[r] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m[r]);
      }
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    if constexpr (kFifth) {
      out[r * os] = HorizontalSum(acc[r]) + summs[r];
    } else {
      alignas(16) float am[4];
      _mm_store_ps(am, acc_m[r]);
      out[r * os] = HorizontalSum(acc[r]) + ((am[0] + am[2]) + (am[1] + am[3]));
    }
  }
}

// Q6_K weights against Q8_K activations.
template <int R>
void RowsQ6_K(const BlockQ6_K* x, ActRows<BlockQ8_K> y, int64_t nb, float* out, int64_t os) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i scales16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
    __m256i sumi[R];
    for (int r = 0; r < R; ++r) sumi[r] = _mm256_setzero_si256();
    for (int j = 0; j < 2; ++j) {
      // Scales 8j..8j+7 (16-bit) in both 128-bit lanes: chunk k takes 2k and 2k + 1.
      const __m256i half_scales = j == 0 ? _mm256_permute2x128_si256(scales16, scales16, 0x00)
                                         : _mm256_permute2x128_si256(scales16, scales16, 0x11);
      __m256i q[4];
      Q6KQuants(x[i].ql, x[i].qh, j, q);
      for (int k = 0; k < 4; ++k) {
        const __m256i scales = _mm256_shuffle_epi8(half_scales, WordBroadcast(2 * k, 2 * k + 1));
        for (int r = 0; r < R; ++r) {
          const __m256i y8 = Load32(y.At(r, i).qs + 128 * j + 32 * k);
          sumi[r] = AddScaled(sumi[r], scales, q[k], y8);
        }
      }
    }
    const float xd = H(x[i].d);
    for (int r = 0; r < R; ++r) {
      const BlockQ8_K& b = y.At(r, i);
      const __m256i low_bias = _mm256_slli_epi32(_mm256_madd_epi16(Load32(b.bsums), scales16), 5);
      const __m256i s = _mm256_sub_epi32(sumi[r], low_bias);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(b.d * xd), _mm256_cvtepi32_ps(s), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * os] = HorizontalSum(acc[r]);
}

template <int R>
bool Rows(DType type, int64_t nb, const void* w, const uint8_t* act, size_t stride, float* out,
          int64_t os) {
  switch (type) {
    case DType::kQ4_0:
      RowsQx_0<R, true>(As<BlockQ4_0>(w), {act, stride}, nb, out, os);
      return true;
    case DType::kQ8_0:
      RowsQx_0<R, false>(As<BlockQ8_0>(w), {act, stride}, nb, out, os);
      return true;
    case DType::kQ4_K:
      RowsQxK<R, false>(As<BlockQ4_K>(w), {act, stride}, nb, out, os);
      return true;
    case DType::kQ5_K:
      RowsQxK<R, true>(As<BlockQ5_K>(w), {act, stride}, nb, out, os);
      return true;
    case DType::kQ6_K:
      RowsQ6_K<R>(As<BlockQ6_K>(w), {act, stride}, nb, out, os);
      return true;
    default:
      return false;
  }
}

}  // namespace

bool VecDotRowsAvx2(DType weight_type, int64_t n, const void* w, const void* act, size_t act_stride,
                    int rows, float* out, int64_t out_stride) {
  const int64_t nb = n / DTypeBlockElems(weight_type);
  const auto* a = static_cast<const uint8_t*>(act);
  switch (rows) {
    case 1:
      return Rows<1>(weight_type, nb, w, a, act_stride, out, out_stride);
    case 2:
      return Rows<2>(weight_type, nb, w, a, act_stride, out, out_stride);
    case 3:
      return Rows<3>(weight_type, nb, w, a, act_stride, out, out_stride);
    case 4:
      return Rows<4>(weight_type, nb, w, a, act_stride, out, out_stride);
    default:
      return false;
  }
}

}  // namespace pagoda::kernels::quant
