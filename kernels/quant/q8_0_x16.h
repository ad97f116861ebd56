// Q8_0 weights re-laid out for the CPU's AVX-512 VNNI matrix product (DType::kQ8_0x16):
// sixteen rows side by side, as q4_k_x16.h does for Q4_K. VPDPBUSD takes the signed weight
// quants against the activation quants biased to unsigned (a + 128, broadcast to every
// lane), less 128 times the weight quants' sum: the exact integer dot product of a block, so
// each output has one float accumulator and one order of float operations whatever the
// number of activation rows (VecDotQ8_0x16 defines it; the kernel keeps it bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quant/vec_dot_rows.h"

namespace pagoda::kernels::quant {

// Rows per interleaved group.
inline constexpr int kQ8_0xRows = 16;

// Block i of sixteen Q8_0 rows, the same bytes moved: each row's fp16 d, then quant 4k + t of
// row `row` at qs[k][row][t] (qs[k] is a 64-byte register of four quants per row).
struct BlockQ8_0x16 {
  uint16_t d[kQ8_0xRows];
  int8_t qs[8][kQ8_0xRows][4];
};
static_assert(sizeof(BlockQ8_0x16) == 16 * 34, "the same bytes as sixteen Q8_0 blocks");

// Rows [0, rows) of a Q8_0 matrix of width n at `src` (rows a multiple of 16), interleaved
// into `dst` (the same size; no overlap). Group g, block i at
// dst + (g * n / 32 + i) * sizeof(BlockQ8_0x16).
void InterleaveQ8_0(const void* src, int64_t rows, int64_t n, void* dst);

// Row r of an interleaved matrix of width n, as floats (Q8_0's dequantization).
void DequantizeQ8_0x16Row(const void* data, int64_t r, int64_t n, float* out);

// The dot product of row `row` (0..15) of the group at `group` with a Q8_0 row of width n:
// per block, acc = fma(d * a.d, sum of quant * a (an exact integer), acc).
float VecDotQ8_0x16(const void* group, int row, int64_t n, const void* act);

// The n quants of a Q8_0 row, each plus 128 (as unsigned bytes: XOR 0x80), one after the
// other: what the kernel reads.
void BiasQuantsQ8_0(const void* act, int64_t n, uint8_t* biased);

// out[r * out_stride + 16 g + c] = VecDotQ8_0x16(group g, row c, n, act row r) for every
// group g in [0, groups) of `w` (interleaved, width n) and r in [0, act.rows <= kVecDotRows):
// the kernel reads act.qs as BiasQuantsQ8_0's rows (row r's at act.qs + r * n) and
// act.scales as WidenScales' (row r's at act.scales + r * act.scale_stride).
// Precondition: CpuHasQ4_Kx16() (the same instructions).
void VecDotQ8_0x16Rows(int64_t n, const void* w, int64_t groups, const ActRows& act, float* out,
                       int64_t out_stride);

}  // namespace pagoda::kernels::quant
