// Everything in this file is compiled for AVX2 + FMA + F16C and only reached after
// CpuRuns(CpuIsa::kAvx2). Lane u of every 8-lane integer sum covers elements 4u..4u+3 of a
// 32-element chunk, as the portable code in vec_dot.cc defines it.
#pragma GCC target("avx2,fma,f16c")

#include "kernels/quant/vec_dot_avx2.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/quant/avx2_lanes.h"
#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"

namespace pagoda::kernels::quant {
namespace {

float DotQ4_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i q = SignedQuants<true>(x[i]);
    const __m256 s = _mm256_cvtepi32_ps(LaneSumsSigned(q, Load32(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(H(x[i].d) * H(y[i].d)), s, acc);
  }
  return HorizontalSum(acc);
}

float DotQ5_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i q5 = _mm256_or_si256(Nibbles(x[i].qs), FifthBits(x[i].qh));
    const __m256i q = _mm256_sub_epi8(q5, _mm256_set1_epi8(16));
    const __m256 s = _mm256_cvtepi32_ps(LaneSumsSigned(q, Load32(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(H(x[i].d) * H(y[i].d)), s, acc);
  }
  return HorizontalSum(acc);
}

float DotQ8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256 s = _mm256_cvtepi32_ps(LaneSumsSigned(Load32(x[i].qs), Load32(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(H(x[i].d) * H(y[i].d)), s, acc);
  }
  return HorizontalSum(acc);
}

// Q4_1 (kFifth false) and Q5_1: unsigned quants, mins added apart at the end.
template <bool kFifth, typename Block>
float DotQx1(const Block* x, const BlockQ8_1* y, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  for (int64_t i = 0; i < nb; ++i) {
    summs += H(x[i].m) * H(y[i].s);
    __m256i q = Nibbles(x[i].qs);
    if constexpr (kFifth) q = _mm256_or_si256(q, FifthBits(x[i].qh));
    const __m256 s = _mm256_cvtepi32_ps(LaneSumsUnsigned(q, Load32(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(H(x[i].d) * H(y[i].d)), s, acc);
  }
  return HorizontalSum(acc) + summs;
}

float DotQ2_K(const BlockQ2_K* x, const BlockQ8_K* y, int64_t nb) {
  const __m256i three = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * H(x[i].d);
    const float dmin = -y[i].d * H(x[i].dmin);
    const uint8_t* sc = x[i].scales;
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc));
    const __m256i mins =
        _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F)));
    const __m256i prod = _mm256_madd_epi16(mins, Load32(y[i].bsums));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc);
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 2; ++j) {
      const __m256i bits = Load32(x[i].qs + 32 * j);
      for (int k = 0; k < 4; ++k) {
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), three);
        const int g = 8 * j + 2 * k;
        sumi = _mm256_add_epi32(
            sumi, ScaledChunk(q, Load32(y[i].qs + 128 * j + 32 * k), sc[g] & 0xF, sc[g + 1] & 0xF));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return HorizontalSum(acc);
}

// Q3_K: quants low2 - 4 * (high bit clear), as two unsigned products subtracted.
float DotQ3_K(const BlockQ3_K* x, const BlockQ8_K* y, int64_t nb) {
  const __m256i three = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * H(x[i].d);
    int8_t scales[16];
    UnpackQ3KScales(x[i].scales, scales);
    const __m256i hbits = Load32(x[i].hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 2; ++j) {
      const __m256i bits = Load32(x[i].qs + 32 * j);
      for (int k = 0; k < 4; ++k) {
        const int bit = 4 * j + k;
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), three);
        const __m256i clear =
            _mm256_andnot_si256(hbits, _mm256_set1_epi8(static_cast<char>(1 << bit)));
        const __m256i four = _mm256_slli_epi16(_mm256_srli_epi16(clear, bit), 2);
        const __m256i y8 = Load32(y[i].qs + 128 * j + 32 * k);
        const __m256i pairs =
            _mm256_sub_epi16(_mm256_maddubs_epi16(low, y8), _mm256_maddubs_epi16(four, y8));
        const int g = 8 * j + 2 * k;
        sumi = _mm256_add_epi32(sumi, ScalePairs(pairs, scales[g], scales[g + 1]));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return HorizontalSum(acc);
}

// Q4_K (qh == nullptr) and Q5_K super-blocks' scaled integer lanes.
template <typename Block>
__m256i KSums(const Block& x, const BlockQ8_K& y, const uint8_t* qh, const uint8_t* sc) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i hbits = qh != nullptr ? Load32(qh) : _mm256_setzero_si256();
  __m256i sumi = _mm256_setzero_si256();
  for (int j = 0; j < 4; ++j) {
    const __m256i bits = Load32(x.qs + 32 * j);
    __m256i lo = _mm256_and_si256(bits, low4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
    if (qh != nullptr) {
      lo = _mm256_or_si256(
          lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one), 4));
      hi = _mm256_or_si256(
          hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one), 4));
    }
    sumi = _mm256_add_epi32(sumi, ScaledChunk(lo, Load32(y.qs + 64 * j), sc[2 * j], sc[2 * j]));
    sumi = _mm256_add_epi32(
        sumi, ScaledChunk(hi, Load32(y.qs + 64 * j + 32), sc[2 * j + 1], sc[2 * j + 1]));
  }
  return sumi;
}

void MinProducts(const BlockQ8_K& y, const uint8_t* m, int32_t* prod) {
  int32_t g[8];
  for (int t = 0; t < 8; ++t) g[t] = y.bsums[2 * t] + y.bsums[2 * t + 1];
  for (int k = 0; k < 4; ++k) prod[k] = m[2 * k] * g[2 * k] + m[2 * k + 1] * g[2 * k + 1];
}

float DotQ4_K(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  float acc_m[4] = {};
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * H(x[i].d);
    const float dmin = -y[i].d * H(x[i].dmin);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) ScaleMinK4(j, x[i].scales, &sc[j], &m[j]);
    int32_t prod[4];
    MinProducts(y[i], m, prod);
    for (int k = 0; k < 4; ++k) acc_m[k] = std::fma(dmin, static_cast<float>(prod[k]), acc_m[k]);
    const __m256i sumi = KSums(x[i], y[i], nullptr, sc);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return HorizontalSum(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

float DotQ5_K(const BlockQ5_K* x, const BlockQ8_K* y, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * H(x[i].d);
    const float dmin = -y[i].d * H(x[i].dmin);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) ScaleMinK4(j, x[i].scales, &sc[j], &m[j]);
    int32_t prod[4];
    MinProducts(y[i], m, prod);
    summs = std::fma(dmin, static_cast<float>((prod[0] + prod[1]) + (prod[2] + prod[3])), summs);
    const __m256i sumi = KSums(x[i], y[i], x[i].qh, sc);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return HorizontalSum(acc) + summs;
}

float DotQ6_K(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * H(x[i].d);
    const int8_t* sc = x[i].scales;
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 2; ++j) {
      __m256i q[4];
      Q6KQuants(x[i].ql, x[i].qh, j, q);
      for (int k = 0; k < 4; ++k) {
        const int g = 8 * j + 2 * k;
        sumi = _mm256_add_epi32(
            sumi, ScaledChunk(q[k], Load32(y[i].qs + 128 * j + 32 * k), sc[g], sc[g + 1]));
      }
    }
    const __m256i bsums = Load32(y[i].bsums);
    const __m256i scales16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16), 5));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return HorizontalSum(acc);
}

// ggml_vec_dot_f16's order: 4 x 8 lanes over steps of 32, then (s0 + s2) + (s1 + s3).
float DotF16(const uint16_t* x, const uint16_t* y, int64_t n) {
  const int64_t np = n & ~int64_t{31};
  __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < np; i += 32) {
    for (int j = 0; j < 4; ++j) {
      const __m256 a =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8 * j)));
      const __m256 b =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i + 8 * j)));
      sum[j] = _mm256_fmadd_ps(a, b, sum[j]);
    }
  }
  sum[0] = _mm256_add_ps(sum[0], sum[2]);
  sum[1] = _mm256_add_ps(sum[1], sum[3]);
  sum[0] = _mm256_add_ps(sum[0], sum[1]);
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(sum[0]), _mm256_extractf128_ps(sum[0], 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  double sumf = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
  for (int64_t k = np; k < n; ++k) sumf += static_cast<double>(H(x[k]) * H(y[k]));
  return static_cast<float>(sumf);
}

inline __m256 LoadBf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// ggml_vec_dot_bf16's order: 4 x 8 lanes (multiply, then add), (c1 + c3) + (c2 + c4).
float DotBf16(const uint16_t* x, const uint16_t* y, int64_t n) {
  __m256 c[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                 _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      c[j] = _mm256_add_ps(_mm256_mul_ps(LoadBf16(x + i + 8 * j), LoadBf16(y + i + 8 * j)), c[j]);
    }
  }
  const __m256 r = _mm256_add_ps(_mm256_add_ps(c[0], c[2]), _mm256_add_ps(c[1], c[3]));
  double sumf = HorizontalSum(r);
  for (; i < n; ++i) sumf += static_cast<double>(Bf16ToFloat(x[i]) * Bf16ToFloat(y[i]));
  return static_cast<float>(sumf);
}

}  // namespace

bool VecDotAvx2(DType type, int64_t n, const void* w, const void* act, float* out) {
  const int64_t nb = n / DTypeBlockElems(type);
  switch (type) {
    case DType::kF16:
      *out = DotF16(As<uint16_t>(w), As<uint16_t>(act), n);
      return true;
    case DType::kBF16:
      *out = DotBf16(As<uint16_t>(w), As<uint16_t>(act), n);
      return true;
    case DType::kQ4_0:
      *out = DotQ4_0(As<BlockQ4_0>(w), As<BlockQ8_0>(act), nb);
      return true;
    case DType::kQ4_1:
      *out = DotQx1<false>(As<BlockQ4_1>(w), As<BlockQ8_1>(act), nb);
      return true;
    case DType::kQ5_0:
      *out = DotQ5_0(As<BlockQ5_0>(w), As<BlockQ8_0>(act), nb);
      return true;
    case DType::kQ5_1:
      *out = DotQx1<true>(As<BlockQ5_1>(w), As<BlockQ8_1>(act), nb);
      return true;
    case DType::kQ8_0:
      *out = DotQ8_0(As<BlockQ8_0>(w), As<BlockQ8_0>(act), nb);
      return true;
    case DType::kQ2_K:
      *out = DotQ2_K(As<BlockQ2_K>(w), As<BlockQ8_K>(act), nb);
      return true;
    case DType::kQ3_K:
      *out = DotQ3_K(As<BlockQ3_K>(w), As<BlockQ8_K>(act), nb);
      return true;
    case DType::kQ4_K:
      *out = DotQ4_K(As<BlockQ4_K>(w), As<BlockQ8_K>(act), nb);
      return true;
    case DType::kQ5_K:
      *out = DotQ5_K(As<BlockQ5_K>(w), As<BlockQ8_K>(act), nb);
      return true;
    case DType::kQ6_K:
      *out = DotQ6_K(As<BlockQ6_K>(w), As<BlockQ8_K>(act), nb);
      return true;
    default:
      return false;
  }
}

}  // namespace pagoda::kernels::quant
