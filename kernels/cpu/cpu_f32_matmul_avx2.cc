// Compiled for AVX2 + FMA and only reached after __builtin_cpu_supports("avx2") and "fma".
#if defined(__x86_64__)
#pragma GCC target("avx2,fma")

#include <immintrin.h>

#include "kernels/cpu/cpu_f32_matmul_impl.h"

namespace pagoda::kernels::cpu {
namespace {

constexpr int kRows = 3;  // activation rows per tile
constexpr int kCols = 4;  // weight rows per tile (12 accumulators of 16 registers)

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One R x C tile of dot products over the full k: 8 lanes per accumulator, summed at the end,
// then the k % 8 tail added in order.
template <int R, int C>
void Tile(const float* x, int64_t xs, const float* w, int64_t ws, float* out, int64_t os, int64_t k,
          bool accumulate) {
  __m256 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 xv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x + r * xs + p);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m256 wv = _mm256_loadu_ps(w + c * ws + p);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      float sum = HorizontalSum(acc[r][c]);
      for (int64_t q = p; q < k; ++q) sum += x[r * xs + q] * w[c * ws + q];
      out[r * os + c] = accumulate ? out[r * os + c] + sum : sum;
    }
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t,
                        bool);

// kTiles[r - 1][c - 1] computes an r x c tile. (No std:: templates in this file: their
// instances would be compiled for this instruction set and may be picked by the linker.)
constexpr TileFn kTiles[kRows][kCols] = {
    {&Tile<1, 1>, &Tile<1, 2>, &Tile<1, 3>, &Tile<1, 4>},
    {&Tile<2, 1>, &Tile<2, 2>, &Tile<2, 3>, &Tile<2, 4>},
    {&Tile<3, 1>, &Tile<3, 2>, &Tile<3, 3>, &Tile<3, 4>},
};

}  // namespace

void F32DotAvx2(const float* x, int64_t x_stride, const float* w, int64_t w_stride, float* out,
                int64_t out_stride, int64_t n, int64_t m, int64_t k, bool accumulate) {
  // A block of weight rows stays in cache while every activation row passes over it.
  for (int64_t j = 0; j < m; j += kCols) {
    const int c = static_cast<int>(m - j < kCols ? m - j : kCols);
    for (int64_t i = 0; i < n; i += kRows) {
      const int r = static_cast<int>(n - i < kRows ? n - i : kRows);
      kTiles[r - 1][c - 1](x + i * x_stride, x_stride, w + j * w_stride, w_stride,
                           out + i * out_stride + j, out_stride, k, accumulate);
    }
  }
}

}  // namespace pagoda::kernels::cpu
#endif  // __x86_64__
