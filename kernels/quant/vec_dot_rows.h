// A run of weight rows against several activation rows at once: the batched path of the CPU
// matrix product (decode batches and prefill). Each result equals VecDot's bit for bit: the
// integer lane sums are exact and every output keeps its own float accumulators, in the
// single-row order; what is shared is the work on the weight (unpacking quants and scales),
// done once per block for all rows instead of once per row, and the kernel's setup, done
// once per run of weight rows instead of once per weight row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::quant {

// Most activation rows one call takes.
inline constexpr int kVecDotRows = 8;

// Up to kVecDotRows activation rows of VecDotType(weight_type), `stride` bytes apart. For
// Q8_0 activations, `scales` may hold each block's scale widened to float (WidenScales),
// `scale_stride` floats apart from row to row: the Q8_0 and Q4_0 kernels then read those
// instead of converting every block's fp16 scale once per weight row (the same floats, so
// the same bits).
// `block_d` may hold every block's scale of the rows side by side (Q8_K: its d; Q8_0: its
// fp16 d widened): block i's at block_d + kVecDotRows * i, row r's in lane r (lanes past
// `rows` 0), so the AVX-512 kernels load them as one vector instead of gathering them per
// weight row (the AVX2 ones read `scales`).
// `qs` may hold the rows' quants copied to 64-byte-aligned storage (PackQuants), so the
// AVX-512 kernels' 64-byte loads never straddle two cache lines: Q8_K rows one after the
// other (row r's n quants at qs + r * n), then, from qs + kVecDotRows * n, each block's eight
// sums of 32 quants as int16 for rows in fours (block i of rows 4u .. 4u + 3 at 64 bytes
// number u * n / 256 + i, row 4u + v's at 16 bytes number v, rows past `rows` 0: a Q4_K
// kernel takes four rows' min products with one VPMADDWD); Q8_0 rows in pairs, rows 2p and
// 2p + 1 taking turns block by block (32 bytes each, from qs + 2p * n), every byte XOR 0x80
// (q + 128, unsigned: what VPDPBUSD wants), an odd last row left out.
struct ActRows {
  const void* data = nullptr;
  size_t stride = 0;
  int rows = 0;
  const float* scales = nullptr;
  size_t scale_stride = 0;
  const float* block_d = nullptr;
  const int8_t* qs = nullptr;
};

// Weight rows [0, rows), `stride` bytes apart.
struct WeightRows {
  const void* data = nullptr;
  size_t stride = 0;
  int64_t rows = 1;
};

// The layout ActRows::block_d describes, for rows [0, rows) of Q8_0 or Q8_K activations
// (`type`) of width n, `stride` bytes apart: n / block * kVecDotRows floats at `block_d`.
void TransposeBlockScales(DType type, const void* rows_data, size_t stride, int rows, int64_t n,
                          float* block_d);

// The layout ActRows::qs describes, for rows [0, rows) of Q8_0 or Q8_K activations (`type`)
// of width n, `stride` bytes apart, at `qs` (64-byte aligned, PackedQuantsBytes(type, n)).
void PackQuants(DType type, const void* rows_data, size_t stride, int rows, int64_t n, int8_t* qs);
// The bytes PackQuants writes for kVecDotRows rows (a multiple of 64).
size_t PackedQuantsBytes(DType type, int64_t n);

// out[r * out_stride + c] = VecDot(weight_type, n, row c of w, row r of act) for r in
// [0, act.rows) and c in [0, w.rows), 1 <= act.rows <= kVecDotRows.
void VecDotRows(DType weight_type, int64_t n, const WeightRows& w, const ActRows& act, float* out,
                int64_t out_stride);

// The n / 32 block scales of a Q8_0 row, as floats.
void WidenScales(const void* q8_0_row, int64_t n, float* scales);

// The kernels of one instruction set alone: false, nothing stored, for the weight types
// they leave to others. VecDotRows takes the AVX-512 kernels where the CPU has them and they
// cover the type, else the AVX2 ones, else VecDot row by row; tests call each directly
// (where the CPU runs it) to check it against VecDotPortable whatever this machine picks.
// Q4_0, Q8_0, Q4_K, Q5_K and Q6_K. Precondition: CpuRuns(CpuIsa::kAvx2) (cpu_isa.h).
// VecDotRows picks by ActiveCpuIsa(), so a cap (SetCpuIsaCap) reaches these too.
bool VecDotRowsAvx2(DType weight_type, int64_t n, const WeightRows& w, const ActRows& act,
                    float* out, int64_t out_stride);
// The same types: Q4_K, Q5_K and Q6_K with two 32-byte chunks of a row per 512-bit register,
// Q4_0 and Q8_0 with two rows per register (an odd last row through the AVX2 kernel).
// Precondition: CpuRuns(CpuIsa::kAvx512).
bool VecDotRowsAvx512(DType weight_type, int64_t n, const WeightRows& w, const ActRows& act,
                      float* out, int64_t out_stride);
// VecDotRowsAvx512's kernels with VPDPWSSD / VPDPBUSD (the same integers, the same bits).
// Precondition: CpuRuns(CpuIsa::kAvx512Vnni).
bool VecDotRowsAvx512Vnni(DType weight_type, int64_t n, const WeightRows& w, const ActRows& act,
                          float* out, int64_t out_stride);

}  // namespace pagoda::kernels::quant
