// Dot products of one weight row with one activation row quantized to VecDotType(weight),
// equal bit for bit to ggml-cpu's x86 AVX2 kernels (what llama.cpp runs on x86): the same
// exact integer sums per lane and the same float operations in the same order.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::quant {

// sum_k w[k] * a[k] over `n` elements. `w` holds n elements of `weight_type`, `act` n
// elements of VecDotType(weight_type). Precondition: n is a multiple of the block size.
float VecDot(DType weight_type, int64_t n, const void* w, const void* act);
// The same without the AVX2 code (for tests: both must give the same bits).
float VecDotPortable(DType weight_type, int64_t n, const void* w, const void* act);

}  // namespace pagoda::kernels::quant
