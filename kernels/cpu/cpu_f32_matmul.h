// fp32 matrix products against weights kept row-major as the file stores them ([m, k], k
// contiguous). Each output is a SIMD dot product of an activation row and a weight row, so
// the weights are read in place: there is no per-call packing (OpenBLAS packs every weight
// matrix on every call) and no load-time copy. Kernels for AVX-512F and AVX2+FMA are chosen
// at run time from what the machine has; without either, callers use BLAS.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cpu {

// True when this machine has a SIMD kernel for F32MatMulColumns (AVX-512F or AVX2+FMA).
bool HasF32DotKernel();
// "avx512", "avx2" or "none": the kernel F32MatMulColumns uses on this machine.
const char* F32DotKernelName();

// out[:, m0:m1) = x * w[m0:m1)^T for x [n, k], w [m, k], out [n, m], all f32 (strided views
// allowed). Precondition: HasF32DotKernel() and 0 <= m0 <= m1 <= w.rows.
void F32MatMulColumns(const Tensor& x, const Tensor& w, const Tensor& out, int64_t m0, int64_t m1);

}  // namespace pagoda::kernels::cpu
