// AVX2 activation quantization (activation_quant.h), bit for bit the portable code:
// compiled for AVX2 + FMA + F16C and reached only where CpuRuns(CpuIsa::kAvx2). The absolute
// maximum is a vector max (NaN lanes ignored, as std::max and `>` ignore them); quants round with
// VCVTPS2DQ, which rounds to nearest even like std::nearbyint and ggml's nearest_int at
// these magnitudes (|x| <= 127 after scaling); the products x * scale are the same IEEE
// multiplications; sums of quants are integer sums (exact in any order). Infinite inputs
// (whose blocks are meaningless either way) may quantize differently.
#pragma GCC target("avx2,fma,f16c")

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/quant/activation_quant.h"
#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"

namespace pagoda::kernels::quant {
namespace {

// max(|x[0..n)|), n a multiple of 8; NaN lanes never win (the maximum keeps its second
// operand when the first is NaN).
float AbsMax(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 m = _mm256_setzero_ps();
  for (int j = 0; j < n; j += 8)
    m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m);
  __m128 r = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
  r = _mm_max_ps(_mm_movehl_ps(r, r), r);
  r = _mm_max_ss(_mm_movehdup_ps(r), r);
  return _mm_cvtss_f32(r);
}

// The rounded quants of x[0..8) * scale as int32 lanes.
inline __m256i Quants8(const float* x, __m256 scale) {
  return _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), scale));
}

// 32 int32 quants (four vectors) stored as bytes in order, saturated to [-128, 127].
inline void StoreBytes(const __m256i q[4], int8_t* out) {
  const __m256i w01 = _mm256_packs_epi32(q[0], q[1]);  // lanes interleaved by 128 bits
  const __m256i w23 = _mm256_packs_epi32(q[2], q[3]);
  const __m256i b = _mm256_packs_epi16(w01, w23);
  // packs work within 128-bit lanes: bytes come as 0-3, 8-11, 16-19, 24-27, 4-7, ... (in
  // groups of four int32 sources); put the groups back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permutevar8x32_epi32(b, order));
}

// The index of the first of x[0..) whose magnitude equals m (one of them does).
inline int FirstEqualMagnitude(const float* x, float m) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256 target = _mm256_set1_ps(m);
  for (int j = 0;; j += 8) {
    const __m256 magnitude = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j));
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(magnitude, target, _CMP_EQ_OQ));
    if (mask != 0) return j + __builtin_ctz(static_cast<unsigned>(mask));
  }
}

inline int Sum8(__m256i v) {
  __m128i r = _mm_add_epi32(_mm256_extracti128_si256(v, 1), _mm256_castsi256_si128(v));
  r = _mm_add_epi32(r, _mm_unpackhi_epi64(r, r));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 1));
  return _mm_cvtsi128_si32(r);
}

// One 32-element block of Q8_0/Q8_1: returns d, stores the quants and their sum.
float Q8Block(const float* x, int8_t* qs, int* sum) {
  const float amax = AbsMax(x, kQk);
  const float d = amax / 127.f;
  const float id = amax != 0.f ? 127.f / amax : 0.f;
  const __m256 scale = _mm256_set1_ps(id);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = Quants8(x + 8 * k, scale);
  StoreBytes(q, qs);
  *sum = Sum8(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
  return d;
}

void Q8_K(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    const float amax = AbsMax(x, kQkK);
    if (!(amax > 0.f)) {
      y[i].d = 0;
      std::memset(y[i].qs, 0, kQkK);
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
      continue;
    }
    // The signed value of the first element whose magnitude is the maximum (eight
    // magnitudes compared at a time; a NaN never equals it).
    const int first = FirstEqualMagnitude(x, amax);
    const float iscale = -127.f / x[first];
    if (!std::isfinite(iscale)) {
      // A block of subnormals: 127 / max overflows, and ggml's nearest_int makes every
      // quant 0 (its bit trick on an infinite or NaN product).
      std::memset(y[i].qs, 0, kQkK);
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
      y[i].d = 1 / iscale;
      continue;
    }
    const __m256 scale = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    for (int g = 0; g < kQkK / 32; ++g) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) q[k] = _mm256_min_epi32(Quants8(x + 32 * g + 8 * k, scale), top);
      StoreBytes(q, y[i].qs + 32 * g);
      y[i].bsums[2 * g] = static_cast<int16_t>(Sum8(_mm256_add_epi32(q[0], q[1])));
      y[i].bsums[2 * g + 1] = static_cast<int16_t>(Sum8(_mm256_add_epi32(q[2], q[3])));
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace

bool QuantizeActivationsAvx2(DType type, const float* x, void* dst, int64_t n) {
  switch (type) {
    case DType::kQ8_0: {
      auto* y = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < n / kQk; ++i, x += kQk) {
        int sum;
        y[i].d = FloatToHalf(Q8Block(x, y[i].qs, &sum));
      }
      return true;
    }
    case DType::kQ8_1: {
      auto* y = static_cast<BlockQ8_1*>(dst);
      for (int64_t i = 0; i < n / kQk; ++i, x += kQk) {
        int sum;
        const float d = Q8Block(x, y[i].qs, &sum);
        y[i].d = FloatToHalf(d);
        y[i].s = FloatToHalf(d * static_cast<float>(sum));
      }
      return true;
    }
    case DType::kQ8_K:
      Q8_K(x, static_cast<BlockQ8_K*>(dst), n / kQkK);
      return true;
    default:
      return false;
  }
}

}  // namespace pagoda::kernels::quant
