// AVX2 kernels of VecDotRows (vec_dot_rows.h): compiled for AVX2 + FMA + F16C and reached
// only where CpuRuns(CpuIsa::kAvx2). Each kernel is the single-row kernel of vec_dot_avx2.cc with
// the loop over activation rows moved inside the loop over blocks: a block's quants and scales are
// unpacked once, then every row takes its exact integer lane sums and its own fused multiply-adds
// in the single-row order, so each result keeps the single-row bits.
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

// Block i of activation row r.
template <typename Y>
struct RowsOf {
  const uint8_t* base;
  size_t stride;
  const Y& At(int r, int64_t i) const { return As<Y>(base + r * stride)[i]; }
};

// Q8_0 (kNibbles false) and Q4_0 weights against Q8_0 activations.
// With kWide, the activation blocks' scales come widened (ActRows::scales).
template <int R, bool kNibbles, bool kWide, typename Block>
void RowsQx_0(const Block* x, RowsOf<BlockQ8_0> y, const float* scales, size_t ss, int64_t nb,
              float* out, int64_t os) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i q = SignedQuants<kNibbles>(x[i]);
    // LaneSumsSigned(q, y) with |q| computed once for all rows.
    const __m256i abs_q = _mm256_sign_epi8(q, q);
    const float xd = H(x[i].d);
    for (int r = 0; r < R; ++r) {
      const BlockQ8_0& b = y.At(r, i);
      const __m256i sums = LaneSumsUnsigned(abs_q, _mm256_sign_epi8(Load32(b.qs), q));
      const float yd = kWide ? scales[r * ss + i] : H(b.d);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(xd * yd), _mm256_cvtepi32_ps(sums), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * os] = HorizontalSum(acc[r]);
}

// Q4_K (kFifth false) and Q5_K weights against Q8_K activations.
template <int R, bool kFifth, typename Block>
void RowsQxK(const Block* x, RowsOf<BlockQ8_K> y, int64_t nb, float* out, int64_t os) {
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
void RowsQ6_K(const BlockQ6_K* x, RowsOf<BlockQ8_K> y, int64_t nb, float* out, int64_t os) {
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

template <int R, bool kNibbles, typename Block>
void RowsQx_0(const void* w, const ActRows& act, int64_t nb, float* out, int64_t os) {
  const RowsOf<BlockQ8_0> y{static_cast<const uint8_t*>(act.data), act.stride};
  // A single row converts its own scales: measured faster than reading them widened.
  if (R > 1 && act.scales != nullptr) {
    RowsQx_0<R, kNibbles, true>(As<Block>(w), y, act.scales, act.scale_stride, nb, out, os);
  } else {
    RowsQx_0<R, kNibbles, false>(As<Block>(w), y, nullptr, 0, nb, out, os);
  }
}

template <int R>
bool Rows(DType type, int64_t nb, const void* w, const ActRows& act, float* out, int64_t os) {
  const RowsOf<BlockQ8_K> y{static_cast<const uint8_t*>(act.data), act.stride};
  switch (type) {
    case DType::kQ4_0:
      RowsQx_0<R, true, BlockQ4_0>(w, act, nb, out, os);
      return true;
    case DType::kQ8_0:
      RowsQx_0<R, false, BlockQ8_0>(w, act, nb, out, os);
      return true;
    case DType::kQ4_K:
      RowsQxK<R, false>(As<BlockQ4_K>(w), y, nb, out, os);
      return true;
    case DType::kQ5_K:
      RowsQxK<R, true>(As<BlockQ5_K>(w), y, nb, out, os);
      return true;
    case DType::kQ6_K:
      RowsQ6_K<R>(As<BlockQ6_K>(w), y, nb, out, os);
      return true;
    default:
      return false;
  }
}

// One weight row against act's rows.
bool OneWeightRow(DType weight_type, int64_t n, const void* w, const ActRows& act, float* out,
                  int64_t out_stride) {
  const int64_t nb = n / DTypeBlockElems(weight_type);
  if (act.rows > 4) {
    // At most four rows per pass (sixteen vector registers).
    ActRows rest = act;
    rest.rows = act.rows - 4;
    rest.data = static_cast<const uint8_t*>(act.data) + 4 * act.stride;
    if (act.scales != nullptr) rest.scales = act.scales + 4 * act.scale_stride;
    ActRows first = act;
    first.rows = 4;
    return Rows<4>(weight_type, nb, w, first, out, out_stride) &&
           OneWeightRow(weight_type, n, w, rest, out + 4 * out_stride, out_stride);
  }
  switch (act.rows) {
    case 1:
      return Rows<1>(weight_type, nb, w, act, out, out_stride);
    case 2:
      return Rows<2>(weight_type, nb, w, act, out, out_stride);
    case 3:
      return Rows<3>(weight_type, nb, w, act, out, out_stride);
    case 4:
      return Rows<4>(weight_type, nb, w, act, out, out_stride);
    default:
      return false;
  }
}

}  // namespace

bool VecDotRowsAvx2(DType weight_type, int64_t n, const WeightRows& w, const ActRows& act,
                    float* out, int64_t out_stride) {
  const auto* wr = static_cast<const uint8_t*>(w.data);
  for (int64_t c = 0; c < w.rows; ++c) {
    if (!OneWeightRow(weight_type, n, wr + c * w.stride, act, out + c, out_stride)) return false;
  }
  return true;
}

}  // namespace pagoda::kernels::quant
