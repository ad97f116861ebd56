// Q4_K weights re-laid out for the CPU's AVX-512 VNNI matrix product (DType::kQ4_Kx16):
// sixteen rows side by side, so that one VPDPBUSD multiplies the same four quants of sixteen
// weight rows by four activation bytes broadcast to every lane. The rows' integer dot
// product per block is exact in any order, so each output has one float accumulator and one
// order of float operations, whatever the number of activation rows: VecDotQ4_Kx16 below
// defines it and the kernel keeps it bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quant/vec_dot_rows.h"

namespace pagoda::kernels::quant {

// Rows per interleaved group.
inline constexpr int kQ4_KxRows = 16;

// Block i of sixteen Q4_K rows, the same bytes moved: each row's fp16 d and dmin; byte b of
// each row's packed 6-bit scales and mins at scales[b][row]; and quant byte 32j + 4k + t of
// row `row` (chunk j: the low nibbles are sub-block 2j, the high ones 2j + 1) at
// qs[j][k][row][t], so qs[j][k] is a 64-byte register of four quants per row.
struct BlockQ4_Kx16 {
  uint16_t d[kQ4_KxRows];
  uint16_t dmin[kQ4_KxRows];
  uint8_t scales[12][kQ4_KxRows];
  uint8_t qs[4][8][kQ4_KxRows][4];
};
static_assert(sizeof(BlockQ4_Kx16) == 16 * 144, "the same bytes as sixteen Q4_K blocks");

// Rows [0, rows) of a Q4_K matrix of width n at `src` (rows a multiple of 16), interleaved
// into `dst` (the same size; the two may not overlap). Group g, block i at
// dst + (g * n / 256 + i) * sizeof(BlockQ4_Kx16).
void InterleaveQ4_K(const void* src, int64_t rows, int64_t n, void* dst);

// Row r of an interleaved matrix of width n, as floats (Q4_K's dequantization).
void DequantizeQ4_Kx16Row(const void* data, int64_t r, int64_t n, float* out);

// The dot product of row `row` (0..15) of the group at `group` with a Q8_K row of width n,
// per block: dot = sum of scale * quant * a over its sub-blocks, mins = sum of min * (the
// sub-block's quant sums) over them (exact integers), then
// acc = fma(-(dmin * a.d), mins, acc), acc = fma(d * a.d, dot, acc).
float VecDotQ4_Kx16(const void* group, int row, int64_t n, const void* act);

// True when the CPU runs the kernel below (AVX-512 F/BW/VL and VNNI).
bool CpuHasQ4_Kx16();
// out[r * out_stride + 16 g + c] = VecDotQ4_Kx16(group g, row c, n, act row r) for every
// group g in [0, groups) of `w` (interleaved, width n) and r in [0, act.rows), act.rows
// <= kVecDotRows (Q8_K rows; the packed layouts of ActRows are not read).
// Precondition: CpuHasQ4_Kx16().
void VecDotQ4_Kx16Rows(int64_t n, const void* w, int64_t groups, const ActRows& act, float* out,
                       int64_t out_stride);

}  // namespace pagoda::kernels::quant
