// fp32 -> block formats with ggml's reference quantizers (quantize_row_*_ref: the
// deterministic, non-imatrix path llama-quantize takes), for writing model files.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::quant {

// Quantizes `n` floats at `src` into DTypeRowBytes(type, n) bytes at `dst` as ggml's
// quantize_row_<type>_ref does; F32/F16/BF16 are converted (round to nearest even).
// Precondition: n is a multiple of DTypeBlockElems(type).
void QuantizeRow(DType type, const float* src, void* dst, int64_t n);

// ggml's nearest_int: round to nearest, ties to even, via the 1.5 * 2^23 trick.
// Precondition: |x| <= 4194303.
int NearestInt(float x);

// The K-format reference quantizers (quantize_k.cc); n is a multiple of 256.
void QuantizeRowQ2_K(const float* x, void* y, int64_t n);
void QuantizeRowQ3_K(const float* x, void* y, int64_t n);
void QuantizeRowQ4_K(const float* x, void* y, int64_t n);
void QuantizeRowQ5_K(const float* x, void* y, int64_t n);
void QuantizeRowQ6_K(const float* x, void* y, int64_t n);

}  // namespace pagoda::kernels::quant
