// AVX-512 kernels of VecDotRows (vec_dot_rows.h) for pairs of activation rows, for the
// weight types where they beat the AVX2 kernels (Q8_0 and Q6_K; Q4_0 shares Q8_0's kernel
// and came out even; measured: for Q4_K and Q5_K, whose per-row work is mostly scales, they
// lost). Compiled for AVX-512F/BW/VL (plus
// AVX2, FMA, F16C) and reached only after CpuHasAvx512Rows(). A 512-bit register holds the
// same 32-byte chunk of two rows, row A in its low half and row B in its high half, against
// the weight chunk in both halves; each half's integer lanes are exactly the AVX2 kernel's
// lanes for its row and its float lanes take the same fused multiply-adds, so both rows keep
// the single-row bits.
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
// GCC 12 warns inside its own intrinsics, which start from _mm512_undefined_*().
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cpuid.h>
#include <immintrin.h>

#include <cmath>
#include <cstddef>

#include "kernels/quant/avx2_lanes.h"
#include "kernels/quant/quant_types.h"
#include "kernels/quant/vec_dot_avx2.h"
#include "kernels/quant/vec_dot_rows.h"

namespace pagoda::kernels::quant {
namespace {

// Blocks i of the two rows of a pair.
template <typename Y>
struct RowPair {
  const Y* a;
  const Y* b;
};

// The same 32 bytes of both rows: A low, B high.
inline __m512i Pair(const void* a, const void* b) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(Load32(a)), Load32(b), 1);
}

inline __m512i Both(__m256i v) { return _mm512_broadcast_i64x4(v); }

inline __m512 Scales(float a, float b) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_zextpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(a))),
                         _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

inline void StoreSums(__m512 acc, float* a, float* b) {
  *a = HorizontalSum(_mm512_castps512_ps256(acc));
  *b = HorizontalSum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
}

inline __m512i ScaledPairs(__m512i scales, __m512i u, __m512i s) {
  return _mm512_madd_epi16(scales, _mm512_maddubs_epi16(u, s));
}

// Q8_0 (kNibbles false) and Q4_0 weights. AVX-512 has no VPSIGNB: negating the activation
// bytes where the weight byte is negative gives the same products with |q| (where q is 0
// the product is 0 either way).
template <bool kNibbles, typename Block>
void PairQx_0(const Block* x, RowPair<BlockQ8_0> y, int64_t nb, float* out_a, float* out_b) {
  __m512 acc = _mm512_setzero_ps();
  const __m512i ones = _mm512_set1_epi16(1);
  for (int64_t i = 0; i < nb; ++i) {
    __m256i q;
    if constexpr (kNibbles) {
      q = _mm256_sub_epi8(Nibbles(x[i].qs), _mm256_set1_epi8(8));
    } else {
      q = Load32(x[i].qs);
    }
    const __m512i q2 = Both(q);
    const __m512i abs_q = _mm512_abs_epi8(q2);
    const __m512i ys = Pair(y.a[i].qs, y.b[i].qs);
    const __m512i signed_y =
        _mm512_mask_sub_epi8(ys, _mm512_movepi8_mask(q2), _mm512_setzero_si512(), ys);
    const __m512i sums = _mm512_madd_epi16(_mm512_maddubs_epi16(abs_q, signed_y), ones);
    const float xd = H(x[i].d);
    acc =
        _mm512_fmadd_ps(Scales(xd * H(y.a[i].d), xd * H(y.b[i].d)), _mm512_cvtepi32_ps(sums), acc);
  }
  StoreSums(acc, out_a, out_b);
}

// Q6_K weights: the scales as in RowsQ6_K (vec_dot_rows_avx2.cc), in both halves.
void PairQ6_K(const BlockQ6_K* x, RowPair<BlockQ8_K> y, int64_t nb, float* out_a, float* out_b) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i three = _mm512_set1_epi8(3);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const int8_t* sc = x[i].scales;
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 2; ++j) {
      const __m512i ql0 = Both(Load32(x[i].ql + 64 * j));
      const __m512i ql1 = Both(Load32(x[i].ql + 64 * j + 32));
      const __m512i qh = Both(Load32(x[i].qh + 32 * j));
      const __m512i lows[4] = {_mm512_and_si512(ql0, low4), _mm512_and_si512(ql1, low4),
                               _mm512_and_si512(_mm512_srli_epi16(ql0, 4), low4),
                               _mm512_and_si512(_mm512_srli_epi16(ql1, 4), low4)};
      for (int k = 0; k < 4; ++k) {
        const __m512i high =
            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 2 * k), three), 4);
        const __m512i q = _mm512_or_si512(lows[k], high);
        const int g = 8 * j + 2 * k;
        const __m512i scales =
            Both(_mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g])));
        const int offset = 128 * j + 32 * k;
        sumi = _mm512_add_epi32(
            sumi, ScaledPairs(scales, q, Pair(y.a[i].qs + offset, y.b[i].qs + offset)));
      }
    }
    const __m512i scales16 =
        Both(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))));
    const __m512i low_bias =
        _mm512_slli_epi32(_mm512_madd_epi16(Pair(y.a[i].bsums, y.b[i].bsums), scales16), 5);
    const float xd = H(x[i].d);
    acc = _mm512_fmadd_ps(Scales(y.a[i].d * xd, y.b[i].d * xd),
                          _mm512_cvtepi32_ps(_mm512_sub_epi32(sumi, low_bias)), acc);
  }
  StoreSums(acc, out_a, out_b);
}

template <typename Y>
RowPair<Y> PairAt(const uint8_t* act, size_t stride, int r) {
  return {As<Y>(act + r * stride), As<Y>(act + (r + 1) * stride)};
}

// Rows r and r + 1.
bool Pair2(DType type, int64_t nb, const void* w, const uint8_t* act, size_t stride, int r,
           float* out, int64_t os) {
  float* a = out + r * os;
  float* b = out + (r + 1) * os;
  switch (type) {
    case DType::kQ4_0:
      PairQx_0<true>(As<BlockQ4_0>(w), PairAt<BlockQ8_0>(act, stride, r), nb, a, b);
      return true;
    case DType::kQ8_0:
      PairQx_0<false>(As<BlockQ8_0>(w), PairAt<BlockQ8_0>(act, stride, r), nb, a, b);
      return true;
    case DType::kQ6_K:
      PairQ6_K(As<BlockQ6_K>(w), PairAt<BlockQ8_K>(act, stride, r), nb, a, b);
      return true;
    default:
      return false;
  }
}

}  // namespace

bool CpuHasAvx512Rows() {
  static const bool has = CpuHasAvx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return has;
}

bool VecDotRowsAvx512(DType weight_type, int64_t n, const void* w, const void* act,
                      size_t act_stride, int rows, float* out, int64_t out_stride) {
  if (rows < 1 || rows > kVecDotRows) return false;
  const int64_t nb = n / DTypeBlockElems(weight_type);
  const auto* a = static_cast<const uint8_t*>(act);
  int r = 0;
  for (; r + 1 < rows; r += 2) {
    if (!Pair2(weight_type, nb, w, a, act_stride, r, out, out_stride)) return false;
  }
  // An odd row: the AVX2 kernel (same bits).
  if (r < rows) {
    return VecDotRowsAvx2(weight_type, n, w, a + r * act_stride, act_stride, 1,
                          out + r * out_stride, out_stride);
  }
  return true;
}

}  // namespace pagoda::kernels::quant
