// The AVX-512 VNNI kernels of interleaved Q4_K, Q8_0 and Q6_K weights (interleaved.h), reached
// only where CpuRuns(CpuIsa::kAvx512Vnni). Each 512-bit lane is one of a group's sixteen weight
// rows. Q4_K: VPDPBUSD multiplies four of its quants by four activation bytes broadcast to every
// lane, eight of them give a sub-block's sums, one VPMULLD scales them; the min products
// come from VPDPWSSD against the Q8_K 16-quant sums. Q8_0: VPDPBUSD multiplies four
// activation bytes, biased to unsigned and broadcast, by four signed quants of each row,
// starting from -128 times the row's quant sums. Q6_K: as Q4_K with its bytes (no
// unpacking), four VPDPBUSD and one VPMULLD per 16 quants, starting from -32 times the
// scaled activation sums (VPDPWSSD). Each block's exact integers then go through
// VecDotQ4_Kx16's / VecDotQ8_0x16's / VecDotQ6_Kx16's float operations, lane by lane.
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
// GCC 12 warns inside its own intrinsics, which start from _mm512_undefined_*() (both
// warnings).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/quant/interleaved.h"
#include "kernels/quant/quant_types.h"
#include "kernels/quant/with_rows.h"

namespace pagoda::kernels::quant {
namespace {

// Four bytes at p broadcast to every 32-bit lane (an embedded-broadcast operand).
inline __m512i Broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// dot[r] += t[r] * scale (lane by lane) for every row.
template <int R>
inline void AddScaled(const __m512i* t, __m512i scale, __m512i* dot) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) dot[r] = _mm512_add_epi32(dot[r], _mm512_mullo_epi32(t[r], scale));
}

// acc[r] = fma(d * a.d, dot[r], acc[r]) for every row, d the sixteen weight rows' fp16 block
// scales and a block i of Q8_K row r at `act`, `stride` bytes apart.
template <int R>
inline void AddBlock(const uint16_t* d16, const uint8_t* act, size_t stride, int64_t i,
                     const __m512i* dot, __m512* acc) {
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d16)));
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const float ad = reinterpret_cast<const BlockQ8_K*>(act + r * stride)[i].d;
    acc[r] =
        _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(ad)), _mm512_cvtepi32_ps(dot[r]), acc[r]);
  }
}

// Q4_K against R Q8_K rows at `act`, `stride` bytes apart, whose sub-block sums
// (SumPairsQ8_K) are at `sums`, 8 nb apart.
template <int R>
void KernelQ4_K(const BlockQ4_Kx16* x, int64_t nb, const uint8_t* act, size_t stride,
                const int16_t* sums, float* out, int64_t os) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // Registers: R float accumulators, R integer block sums, R sub-block sums, and one
  // register of weight quants at a time (each used by every row as soon as it is loaded).
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ4_Kx16& b = x[i];
    // The min products first (VecDotQ4_Kx16's order): mins 2t and 2t + 1 of each row as an
    // int16 pair, VPDPWSSD with the two sub-blocks' quant sums.
    {
      __m512i mins[4];
#pragma GCC unroll 16
      for (int t = 0; t < 4; ++t) {
        mins[t] =
            _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.mins[t])));
      }
      const __m512 dmin =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.dmin)));
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(act + r * stride)[i];
        const int16_t* sum = sums + 8 * (r * nb + i);
        __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int t = 0; t < 4; ++t) m = _mm512_dpwssd_epi32(m, mins[t], Broadcast4(sum + 2 * t));
        acc[r] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, _mm512_set1_ps(y.d)), _mm512_cvtepi32_ps(m),
                                  acc[r]);
      }
    }
    __m512i dot[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int s = 0; s < 8; ++s) {
      const int j = s / 2, h = s % 2;
      const __m512i scale =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales[s])));
      __m512i t[R];
      const int8_t* y[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        y[r] = reinterpret_cast<const BlockQ8_K*>(act + r * stride)[i].qs + 32 * s;
        t[r] = _mm512_setzero_si512();
      }
#pragma GCC unroll 16
      for (int k = 0; k < 8; ++k) {
        const __m512i raw = _mm512_loadu_si512(b.qs[j][k]);
        const __m512i q = _mm512_and_si512(h == 0 ? raw : _mm512_srli_epi16(raw, 4), low4);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) t[r] = _mm512_dpbusd_epi32(t[r], q, Broadcast4(y[r] + 4 * k));
      }
      AddScaled<R>(t, scale, dot);
    }
    AddBlock<R>(b.d, act, stride, i, dot, acc);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * os, acc[r]);
}

// Q6_K against R Q8_K rows at `act`, `stride` bytes apart.
template <int R>
void KernelQ6_K(const BlockQ6_Kx16* x, int64_t nb, const uint8_t* act, size_t stride, float* out,
                int64_t os) {
  // Registers as in KernelQ4_K.
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ6_Kx16& b = x[i];
    // Each row's -32 * (scale * the sub-block's activation sum) first: scales 2t and 2t + 1
    // as an int16 pair, VPDPWSSD with the two 16-quant sums.
    __m512i dot[R];
    {
      __m512i pairs[8];
#pragma GCC unroll 16
      for (int t = 0; t < 8; ++t) {
        pairs[t] =
            _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.scales[t])));
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(act + r * stride)[i];
        __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int t = 0; t < 8; ++t)
          m = _mm512_dpwssd_epi32(m, pairs[t], Broadcast4(y.bsums + 2 * t));
        dot[r] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(m, 5));
      }
    }
#pragma GCC unroll 16
    for (int s = 0; s < 16; ++s) {
      // Scale s of each row, sign-extended from its half of the pair.
      const __m512i pair = _mm512_cvtepi8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.scales[s / 2])));
      const __m512i scale = s % 2 == 0 ? _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16)
                                       : _mm512_srai_epi32(pair, 16);
      __m512i t[R];
      const int8_t* y[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        y[r] = reinterpret_cast<const BlockQ8_K*>(act + r * stride)[i].qs + 16 * s;
        t[r] = _mm512_setzero_si512();
      }
#pragma GCC unroll 16
      for (int k = 0; k < 4; ++k) {
        const __m512i q = _mm512_loadu_si512(b.qs[4 * s + k]);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) t[r] = _mm512_dpbusd_epi32(t[r], q, Broadcast4(y[r] + 4 * k));
      }
      AddScaled<R>(t, scale, dot);
    }
    AddBlock<R>(b.d, act, stride, i, dot, acc);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * os, acc[r]);
}

template <int R>
void KernelQ8_0(const BlockQ8_0x16* x, int64_t n, const uint8_t* qs, const float* scales,
                size_t scale_stride, float* out, int64_t os) {
  const int64_t nb = n / kQk;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_0x16& b = x[i];
    __m512i w[8];
    __m512i bias_sums = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int k = 0; k < 8; ++k) {
      w[k] = _mm512_loadu_si512(b.qs[k]);
      bias_sums = _mm512_dpbusd_epi32(bias_sums, bias, w[k]);
    }
    const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), bias_sums);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.d)));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const uint8_t* y = qs + r * n + kQk * i;
      __m512i t = start;
#pragma GCC unroll 16
      for (int k = 0; k < 8; ++k) t = _mm512_dpbusd_epi32(t, Broadcast4(y + 4 * k), w[k]);
      const __m512 dd = _mm512_mul_ps(d, _mm512_set1_ps(scales[r * scale_stride + i]));
      acc[r] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(t), acc[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * os, acc[r]);
}

}  // namespace

void VecDotQ4_Kx16Rows(int64_t n, const void* w, int64_t groups, const ActRows& act, float* out,
                       int64_t out_stride) {
  const int64_t nb = n / kQkK;
  const auto* x = static_cast<const BlockQ4_Kx16*>(w);
  const auto* a = static_cast<const uint8_t*>(act.data);
  const auto* sums = reinterpret_cast<const int16_t*>(act.qs);
  WithRows(act.rows, [&]<int R>() {
    for (int64_t g = 0; g < groups; ++g) {
      KernelQ4_K<R>(x + g * nb, nb, a, act.stride, sums, out + kInterleavedRows * g, out_stride);
    }
  });
}

void VecDotQ6_Kx16Rows(int64_t n, const void* w, int64_t groups, const ActRows& act, float* out,
                       int64_t out_stride) {
  const int64_t nb = n / kQkK;
  const auto* x = static_cast<const BlockQ6_Kx16*>(w);
  const auto* a = static_cast<const uint8_t*>(act.data);
  WithRows(act.rows, [&]<int R>() {
    for (int64_t g = 0; g < groups; ++g) {
      KernelQ6_K<R>(x + g * nb, nb, a, act.stride, out + kInterleavedRows * g, out_stride);
    }
  });
}

void VecDotQ8_0x16Rows(int64_t n, const void* w, int64_t groups, const ActRows& act, float* out,
                       int64_t out_stride) {
  const int64_t nb = n / kQk;
  const auto* x = static_cast<const BlockQ8_0x16*>(w);
  const auto* qs = reinterpret_cast<const uint8_t*>(act.qs);
  WithRows(act.rows, [&]<int R>() {
    for (int64_t g = 0; g < groups; ++g) {
      KernelQ8_0<R>(x + g * nb, n, qs, act.scales, act.scale_stride, out + kInterleavedRows * g,
                    out_stride);
    }
  });
}

}  // namespace pagoda::kernels::quant
