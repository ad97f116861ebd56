// AVX-512 F/BW/VL kernels of VecDotRows (vec_dot_rows_avx512_impl.h), reached only after
// CpuRuns(CpuIsa::kAvx512).
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
// GCC 12 warns inside its own intrinsics, which start from _mm512_undefined_*() (both
// warnings).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include "kernels/quant/vec_dot_rows.h"
#include "kernels/quant/vec_dot_rows_avx512_impl.h"

namespace pagoda::kernels::quant {

bool VecDotRowsAvx512(DType weight_type, int64_t n, const WeightRows& w, const ActRows& act,
                      float* out, int64_t out_stride) {
  return RowsAvx512(weight_type, n, w, act, out, out_stride);
}

}  // namespace pagoda::kernels::quant
