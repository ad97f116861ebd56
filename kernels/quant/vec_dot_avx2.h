// AVX2/FMA/F16C versions of the hot dot products (vec_dot.h), bit-identical to the
// portable code: the same exact integer lane sums and the same float operations.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::quant {

// Stores VecDot(type, n, w, act) in *out and returns true for the types implemented here;
// false (nothing stored) for the others. Precondition: CpuRuns(CpuIsa::kAvx2) (cpu_isa.h).
bool VecDotAvx2(DType type, int64_t n, const void* w, const void* act, float* out);

}  // namespace pagoda::kernels::quant
