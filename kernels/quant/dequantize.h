// Block formats -> fp32, with ggml's dequantize_row_* semantics (the same float
// operations in the same order, so results are bit-identical to ggml's scalar code).
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::quant {

// Converts `n` elements of `type` at `src` (DTypeRowBytes(type, n) bytes) to fp32.
// Precondition: n is a multiple of DTypeBlockElems(type); every DType is accepted.
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);

}  // namespace pagoda::kernels::quant
