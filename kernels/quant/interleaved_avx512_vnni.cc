// The AVX-512 VNNI kernels of interleaved Q4_K and Q8_0 weights (interleaved.h), reached
// only after CpuHasInterleaved(). Each 512-bit lane is one of a group's sixteen weight rows.
// Q4_K: VPDPBUSD multiplies four of its quants by four activation bytes broadcast to every
// lane, eight of them give a sub-block's sums, one VPMULLD scales them; the min products
// come from VPDPWSSD against the Q8_K 16-quant sums. Q8_0: VPDPBUSD multiplies four
// activation bytes, biased to unsigned and broadcast, by four signed quants of each row,
// starting from -128 times the row's quant sums. Each block's exact integers then go through
// VecDotQ4_Kx16's / VecDotQ8_0x16's float operations, lane by lane.
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

// The eight 6-bit scales and mins of sixteen rows (ScaleMinK4, one row per byte lane).
struct ScalesMins {
  __m128i sc[8];
  __m128i mn[8];
  explicit ScalesMins(const BlockQ4_Kx16& b) {
    __m128i q[12];
#pragma GCC unroll 16
    for (int k = 0; k < 12; ++k) {
      q[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales[k]));
    }
    const __m128i m63 = _mm_set1_epi8(63), m0f = _mm_set1_epi8(0x0F), m30 = _mm_set1_epi8(0x30);
#pragma GCC unroll 16
    for (int j = 0; j < 4; ++j) {
      sc[j] = _mm_and_si128(q[j], m63);
      mn[j] = _mm_and_si128(q[j + 4], m63);
      // (q >> 6) << 4 of a byte: its bits 6 and 7 moved to 4 and 5.
      sc[j + 4] =
          _mm_or_si128(_mm_and_si128(q[j + 8], m0f), _mm_and_si128(_mm_srli_epi16(q[j], 2), m30));
      mn[j + 4] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(q[j + 8], 4), m0f),
                               _mm_and_si128(_mm_srli_epi16(q[j + 4], 2), m30));
    }
  }
};

template <int R>
void KernelQ4_K(const BlockQ4_Kx16* x, int64_t nb, const uint8_t* act, size_t stride, float* out,
                int64_t os) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // The float accumulators live in `out`: the integer sums need the registers.
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * os, _mm512_setzero_ps());
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ4_Kx16& b = x[i];
    const ScalesMins sm(b);
    // The min products first (VecDotQ4_Kx16's order): each min as an int16 pair (min, min),
    // VPDPWSSD with a sub-block's two 16-quant sums.
    {
      __m512i mins[8];
#pragma GCC unroll 16
      for (int s = 0; s < 8; ++s) {
        const __m512i m = _mm512_cvtepu8_epi32(sm.mn[s]);
        mins[s] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
      }
      const __m512 dmin =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.dmin)));
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(act + r * stride)[i];
        __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int s = 0; s < 8; ++s) {
          m = _mm512_dpwssd_epi32(m, mins[s], Broadcast4(y.bsums + 2 * s));
        }
        const __m512 acc = _mm512_loadu_ps(out + r * os);
        _mm512_storeu_ps(out + r * os, _mm512_fnmadd_ps(_mm512_mul_ps(dmin, _mm512_set1_ps(y.d)),
                                                        _mm512_cvtepi32_ps(m), acc));
      }
    }
    __m512i dot[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int s = 0; s < 8; ++s) {
      const int j = s / 2, h = s % 2;
      __m512i q[8];
#pragma GCC unroll 16
      for (int k = 0; k < 8; ++k) {
        const __m512i raw = _mm512_loadu_si512(b.qs[j][k]);
        q[k] = _mm512_and_si512(h == 0 ? raw : _mm512_srli_epi16(raw, 4), low4);
      }
      const __m512i scale = _mm512_cvtepu8_epi32(sm.sc[s]);
      __m512i t[R];
      const int8_t* y[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        y[r] = reinterpret_cast<const BlockQ8_K*>(act + r * stride)[i].qs + 32 * s;
        t[r] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], Broadcast4(y[r]));
      }
#pragma GCC unroll 16
      for (int k = 1; k < 8; ++k) {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          t[r] = _mm512_dpbusd_epi32(t[r], q[k], Broadcast4(y[r] + 4 * k));
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        dot[r] = _mm512_add_epi32(dot[r], _mm512_mullo_epi32(t[r], scale));
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.d)));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const float ad = reinterpret_cast<const BlockQ8_K*>(act + r * stride)[i].d;
      const __m512 acc = _mm512_loadu_ps(out + r * os);
      _mm512_storeu_ps(out + r * os, _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(ad)),
                                                     _mm512_cvtepi32_ps(dot[r]), acc));
    }
  }
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

bool CpuHasInterleaved() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
}

void VecDotQ4_Kx16Rows(int64_t n, const void* w, int64_t groups, const ActRows& act, float* out,
                       int64_t out_stride) {
  const int64_t nb = n / kQkK;
  const auto* x = static_cast<const BlockQ4_Kx16*>(w);
  const auto* a = static_cast<const uint8_t*>(act.data);
  WithRows(act.rows, [&]<int R>() {
    for (int64_t g = 0; g < groups; ++g) {
      KernelQ4_K<R>(x + g * nb, nb, a, act.stride, out + kInterleavedRows * g, out_stride);
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
