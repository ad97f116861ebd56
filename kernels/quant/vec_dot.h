// Dot products of one weight row with one activation row quantized to VecDotType(weight),
// following ggml's scalar reference (ggml_vec_dot_<w>_<act>_generic): integer sums per
// block, scaled and accumulated in float in ggml's order.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::quant {

// sum_k w[k] * a[k] over `n` elements. `w` holds n elements of `weight_type`, `act` n
// elements of VecDotType(weight_type). F16/BF16 products accumulate in double as ggml's
// scalar ggml_vec_dot_f16/bf16 does. Precondition: n is a multiple of the block size.
float VecDot(DType weight_type, int64_t n, const void* w, const void* act);

}  // namespace pagoda::kernels::quant
