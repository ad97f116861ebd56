// One weight row against several activation rows at once: the batched path of the CPU
// matrix product (decode batches and prefill). Each result equals VecDot's bit for bit: the
// integer lane sums are exact and every output keeps its own float accumulators, in the
// single-row order; what is shared is the work on the weight (unpacking quants and scales),
// done once per block for all rows instead of once per row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::quant {

// Most activation rows one call takes.
inline constexpr int kVecDotRows = 4;

// out[r * out_stride] = VecDot(weight_type, n, w, act + r * act_stride) for r in [0, rows),
// 1 <= rows <= kVecDotRows. `act` rows are VecDotType(weight_type) as for VecDot.
void VecDotRows(DType weight_type, int64_t n, const void* w, const void* act, size_t act_stride,
                int rows, float* out, int64_t out_stride);

// The kernels of one instruction set alone: false, nothing stored, for the weight types
// they leave to others. VecDotRows takes the AVX-512 kernels where the CPU has them and they
// cover the type, else the AVX2 ones, else VecDot row by row; tests call each directly
// (where the CPU runs it) to check it against VecDotPortable whatever this machine picks.
// Q4_0, Q8_0, Q4_K, Q5_K and Q6_K. Precondition: CpuHasAvx2().
bool VecDotRowsAvx2(DType weight_type, int64_t n, const void* w, const void* act, size_t act_stride,
                    int rows, float* out, int64_t out_stride);
// True when the CPU also runs AVX-512 F/BW/VL (checked once).
bool CpuHasAvx512Rows();
// Q4_0, Q8_0 and Q6_K, two rows per 512-bit register (an odd last row through the AVX2
// kernel). Precondition: CpuHasAvx512Rows().
bool VecDotRowsAvx512(DType weight_type, int64_t n, const void* w, const void* act,
                      size_t act_stride, int rows, float* out, int64_t out_stride);

}  // namespace pagoda::kernels::quant
