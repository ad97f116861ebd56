// The AVX2 building blocks shared by the vec_dot_*avx2/avx512 kernels: exact
// integer lane sums and the float horizontal sum in ggml's order. Include only from files
// compiled for AVX2 + FMA + F16C (and reached where CpuRuns(CpuIsa::kAvx2)). Everything is in an
// unnamed namespace so that each such file keeps its own copy, compiled for its target.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/quant/quant_types.h"

namespace pagoda::kernels::quant {
namespace {  // NOLINT(build/namespaces): per-file copies on purpose, see above

inline float H(uint16_t h) { return _cvtsh_ss(h); }

// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), the portable Lanes::Sum order.
inline float HorizontalSum(__m256 a) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// Exact int32 lane sums of products of unsigned bytes u (< 128) and signed bytes s.
inline __m256i LaneSumsUnsigned(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// Exact int32 lane sums of products of signed bytes a (never -128) and b.
inline __m256i LaneSumsSigned(__m256i a, __m256i b) {
  return LaneSumsUnsigned(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// A block's 16 nibble bytes as 32 bytes: low nibbles (elements 0..15), then high ones.
inline __m256i Nibbles(const uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(bytes, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
  return _mm256_set_m128i(hi, lo);
}

// 0x10 in byte j where bit j of the 32-bit qh is set, else 0.
inline __m256i FifthBits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(qh)),
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

inline __m256i Load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// A Q4_0 (kNibbles) or Q8_0 weight block's 32 signed quants, in element order.
template <bool kNibbles, typename Block>
inline __m256i SignedQuants(const Block& b) {
  if constexpr (kNibbles) {
    return _mm256_sub_epi8(Nibbles(b.qs), _mm256_set1_epi8(8));
  } else {
    return Load32(b.qs);
  }
}

// Scales (16-bit lanes 0..7 = lo, 8..15 = hi) times the pair sums of u * s.
inline __m256i ScaledChunk(__m256i u, __m256i s, int lo, int hi) {
  const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)),
                                          _mm_set1_epi16(static_cast<int16_t>(lo)));
  return _mm256_madd_epi16(scales, _mm256_maddubs_epi16(u, s));
}

// Scales (16-bit lanes 0..7 = lo, 8..15 = hi) times pair sums already in 16-bit lanes.
inline __m256i ScalePairs(__m256i pairs, int lo, int hi) {
  const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)),
                                          _mm_set1_epi16(static_cast<int16_t>(lo)));
  return _mm256_madd_epi16(scales, pairs);
}

// The six-bit quants (0..63) of half j (0 or 1) of a Q6_K block, from its `ql` and `qh`
// arrays: q[k] holds elements 128j + 32k .. 128j + 32k + 31.
inline void Q6KQuants(const uint8_t* ql, const uint8_t* qh, int j, __m256i q[4]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i three = _mm256_set1_epi8(3);
  const __m256i ql0 = Load32(ql + 64 * j);
  const __m256i ql1 = Load32(ql + 64 * j + 32);
  const __m256i high = Load32(qh + 32 * j);
  const __m256i lows[4] = {_mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
                           _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                           _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
  for (int k = 0; k < 4; ++k) {
    const __m256i h = _mm256_and_si256(_mm256_srli_epi16(high, 2 * k), three);
    q[k] = _mm256_or_si256(lows[k], _mm256_slli_epi16(h, 4));
  }
}

// acc + the int32 lane sums of (16-bit pair sums of u * s) times `scales`, exactly (the pair
// sums never saturate for the operands the kernels pass).
inline __m256i AddScaled(__m256i acc, __m256i scales, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(scales, _mm256_maddubs_epi16(u, s)));
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

template <typename Block>
const Block* As(const void* p) {
  return static_cast<const Block*>(p);
}

}  // namespace
}  // namespace pagoda::kernels::quant
