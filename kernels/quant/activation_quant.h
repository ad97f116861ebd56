// Quantization of activation rows into the formats ggml's CPU matrix products use
// (vec_dot_type): Q8_0, Q8_1 and Q8_K, plus rounding to F16/BF16 for 16-bit weights.
// Q8_0/Q8_1 follow ggml's x86 (AVX/AVX2) quantize_row_q8_0/q8_1, which is what llama.cpp
// runs on x86: scale d = amax / 127, multiplier 127 / amax, ties rounded to even. Q8_K is
// ggml's quantize_row_q8_K_ref (ggml uses it on every architecture).
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::quant {

// The activation type a weight of `weight_type` is multiplied with: Q8_0 for Q4_0/Q5_0/
// Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K types, the type itself for F32/F16/BF16.
DType VecDotType(DType weight_type);
// Quantizes `n` floats into DTypeRowBytes(type, n) bytes of `type` (F32, F16, BF16, Q8_0,
// Q8_1 or Q8_K). Precondition: n is a multiple of DTypeBlockElems(type).
// Takes the AVX2 code where the CPU has it (Q8_0, Q8_1, Q8_K), else the portable code.
void QuantizeActivations(DType type, const float* x, void* dst, int64_t n);
// The portable code alone, and the AVX2 code alone (false, nothing stored, for the other
// types; precondition: CpuRuns(CpuIsa::kAvx2)): bit for bit the same for finite inputs; tests call
// both.
void QuantizeActivationsPortable(DType type, const float* x, void* dst, int64_t n);
bool QuantizeActivationsAvx2(DType type, const float* x, void* dst, int64_t n);

}  // namespace pagoda::kernels::quant
