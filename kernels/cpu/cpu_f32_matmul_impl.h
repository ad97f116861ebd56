// The ISA-specific fp32 dot-product kernels behind cpu_f32_matmul.h. Each computes
// out[i * out_stride + j] = sum_p x[i * x_stride + p] * w[j * w_stride + p] for i < n, j < m
// (added to what out holds when `accumulate`) and must only be called on a machine with its
// instruction set.
#pragma once

#include <cstdint>

namespace pagoda::kernels::cpu {

// AVX-512F kernel: 4 activation rows x 6 weight rows per tile, masked loads for the k tail.
void F32DotAvx512(const float* x, int64_t x_stride, const float* w, int64_t w_stride, float* out,
                  int64_t out_stride, int64_t n, int64_t m, int64_t k, bool accumulate);
// AVX2+FMA kernel: 3 activation rows x 4 weight rows per tile, scalar k tail.
void F32DotAvx2(const float* x, int64_t x_stride, const float* w, int64_t w_stride, float* out,
                int64_t out_stride, int64_t n, int64_t m, int64_t k, bool accumulate);

}  // namespace pagoda::kernels::cpu
