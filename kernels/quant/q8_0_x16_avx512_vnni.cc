// The AVX-512 VNNI kernel of interleaved Q8_0 weights (q8_0_x16.h), reached only after
// CpuHasQ4_Kx16(). Each 512-bit lane is one of a group's sixteen weight rows: VPDPBUSD
// multiplies four activation bytes, biased to unsigned and broadcast to every lane, by four
// signed quants of each row, starting from -128 times the row's quant sums; each block's
// exact integer sum then goes through VecDotQ8_0x16's float operations, lane by lane.
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
// GCC 12 warns inside its own intrinsics, which start from _mm512_undefined_*() (both
// warnings).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/quant/q8_0_x16.h"
#include "kernels/quant/quant_types.h"

namespace pagoda::kernels::quant {
namespace {

// Four bytes at p broadcast to every 32-bit lane.
inline __m512i Broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

template <int R>
void Kernel(const BlockQ8_0x16* x, int64_t n, const uint8_t* qs, const float* scales,
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

void VecDotQ8_0x16Rows(int64_t n, const void* w, int64_t groups, const ActRows& act, float* out,
                       int64_t out_stride) {
  const int64_t nb = n / kQk;
  const auto* x = static_cast<const BlockQ8_0x16*>(w);
  const auto* qs = reinterpret_cast<const uint8_t*>(act.qs);
  auto run = [&]<int R>() {
    for (int64_t g = 0; g < groups; ++g) {
      Kernel<R>(x + g * nb, n, qs, act.scales, act.scale_stride, out + kQ8_0xRows * g, out_stride);
    }
  };
  switch (act.rows) {
    case 1:
      return run.template operator()<1>();
    case 2:
      return run.template operator()<2>();
    case 3:
      return run.template operator()<3>();
    case 4:
      return run.template operator()<4>();
    case 5:
      return run.template operator()<5>();
    case 6:
      return run.template operator()<6>();
    case 7:
      return run.template operator()<7>();
    default:
      return run.template operator()<8>();
  }
}

}  // namespace pagoda::kernels::quant
