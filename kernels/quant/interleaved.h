// Q4_K, Q8_0 and Q6_K weights re-laid out for the CPU's AVX-512 VNNI matrix product
// (DType::kQ4_Kx16, kQ8_0x16, kQ6_Kx16): sixteen rows side by side, so that one
// VPDPBUSD multiplies four quants of each of sixteen weight rows by four activation bytes
// broadcast to every lane. Unpacking and scales are then paid once per weight block, not
// per activation row. The rows' integer dot product per block is exact in any order, so
// each output has one float accumulator and one order of float operations, whatever the
// number of activation rows: VecDotQ4_Kx16 and VecDotQ8_0x16 below define it and the kernels
// keep it bit for bit. Q8_0 keeps the file's bytes; Q4_K unpacks its scales and Q6_K its
// quants at load (their blocks are larger than the file's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quant/vec_dot_rows.h"

namespace pagoda::kernels::quant {

// Rows per interleaved group.
inline constexpr int kInterleavedRows = 16;

// Block i of sixteen Q4_K rows: each row's fp16 d and dmin; its eight 6-bit sub-block scales
// and mins unpacked (ScaleMinK4), scale s of row `row` at scales[s][row] and mins 2t and
// 2t + 1 side by side at mins[t][row]; quant byte 32j + 4k + t of row `row` (chunk j: the
// low nibbles are sub-block 2j, the high ones 2j + 1) at qs[j][k][row][t], so qs[j][k] is a
// 64-byte register of four quants per row. Four bytes per row and block more than the file
// (the scales unpacked once at load instead of at every product).
struct BlockQ4_Kx16 {
  uint16_t d[kInterleavedRows];
  uint16_t dmin[kInterleavedRows];
  uint8_t scales[8][kInterleavedRows];
  uint8_t mins[4][kInterleavedRows][2];
  uint8_t qs[4][8][kInterleavedRows][4];
};
static_assert(sizeof(BlockQ4_Kx16) == 16 * 148, "DType::kQ4_Kx16's 148 bytes per row");

// Block i of sixteen Q8_0 rows: each row's fp16 d, then quant 4k + t of row `row` at
// qs[k][row][t].
struct BlockQ8_0x16 {
  uint16_t d[kInterleavedRows];
  int8_t qs[8][kInterleavedRows][4];
};
static_assert(sizeof(BlockQ8_0x16) == 16 * 34, "the same bytes as sixteen Q8_0 blocks");

// Block i of sixteen Q6_K rows, a byte per quant (the 6-bit quants widened at load: a
// quarter more bytes than the file, and no unpacking in the kernel): each row's fp16 d; its
// sixteen int8 scales (one per 16 quants) in pairs, scales 2t and 2t + 1 of row `row` at
// scales[t][row]; quant e of row `row`, unsigned (the signed quant plus 32, 0..63), at
// qs[e / 4][row][e % 4].
struct BlockQ6_Kx16 {
  uint16_t d[kInterleavedRows];
  int8_t scales[8][kInterleavedRows][2];
  uint8_t qs[64][kInterleavedRows][4];
};
static_assert(sizeof(BlockQ6_Kx16) == 16 * 274, "DType::kQ6_Kx16's 274 bytes per row");

// Rows [0, rows) of a Q4_K (Q8_0, Q6_K) matrix of width n at `src` (rows a multiple of 16),
// interleaved into `dst` (DTypeRowBytes(kQ4_Kx16 or kQ8_0x16, n) * rows bytes; no overlap):
// group g's block i at block g * blocks per row + i.
void InterleaveQ4_K(const void* src, int64_t rows, int64_t n, void* dst);
void InterleaveQ8_0(const void* src, int64_t rows, int64_t n, void* dst);
void InterleaveQ6_K(const void* src, int64_t rows, int64_t n, void* dst);

// Row r of an interleaved matrix of width n, as floats (the file type's dequantization).
void DequantizeQ4_Kx16Row(const void* data, int64_t r, int64_t n, float* out);
void DequantizeQ8_0x16Row(const void* data, int64_t r, int64_t n, float* out);
void DequantizeQ6_Kx16Row(const void* data, int64_t r, int64_t n, float* out);

// The dot product of row `row` (0..15) of the group at `group` with a Q8_K row of width n,
// per block: dot = sum of scale * quant * a over its sub-blocks, mins = sum of min * (the
// sub-block's quant sums) over them (exact integers), then
// acc = fma(-(dmin * a.d), mins, acc), acc = fma(d * a.d, dot, acc).
float VecDotQ4_Kx16(const void* group, int row, int64_t n, const void* act);
// The same with a Q8_0 row: per block, acc = fma(d * a.d, sum of quant * a, acc).
float VecDotQ8_0x16(const void* group, int row, int64_t n, const void* act);
// The same for Q6_K with a Q8_K row: per block, with u the unsigned quants,
// dot = sum over the sixteen sub-blocks of scale * (sum of u * a - 32 * the sub-block's a
// sum) (an exact integer), acc = fma(d * a.d, dot, acc).
float VecDotQ6_Kx16(const void* group, int row, int64_t n, const void* act);

// The sums of each 32 quants (sub-block) of a Q8_K row of width n, as int16 (at most
// 32 * 128 in magnitude), eight per block: what the Q4_K kernel multiplies two mins at a
// time by.
void SumPairsQ8_K(const void* act, int64_t n, int16_t* sums);

// The n quants of a Q8_0 row, each plus 128 (as unsigned bytes: XOR 0x80), one after the
// other: what the Q8_0 kernel reads (VPDPBUSD wants the unsigned operand in the activation).
void BiasQuantsQ8_0(const void* act, int64_t n, uint8_t* biased);

// out[r * out_stride + 16 g + c] = VecDotQ4_Kx16(group g, row c, n, act row r) for every
// group g in [0, groups) of `w` (interleaved, width n) and r in [0, act.rows), act.rows <=
// kVecDotRows: Q8_K rows, and at act.qs SumPairsQ8_K's sums of each (row r's at
// act.qs + r * n / 16 bytes).
void VecDotQ4_Kx16Rows(int64_t n, const void* w, int64_t groups, const ActRows& act, float* out,
                       int64_t out_stride);
// The same for Q6_K (VecDotQ6_Kx16; Q8_K rows, act.qs not read).
void VecDotQ6_Kx16Rows(int64_t n, const void* w, int64_t groups, const ActRows& act, float* out,
                       int64_t out_stride);
// The same for Q8_0 (VecDotQ8_0x16), reading act.qs as BiasQuantsQ8_0's rows (row r's at
// act.qs + r * n) and act.scales as WidenScales' (row r's at act.scales + r *
// act.scale_stride). Precondition of both: CpuRuns(CpuIsa::kAvx512Vnni)
// (cpu_isa.h); the CPU backend interleaves weights at load where that level is active.
void VecDotQ8_0x16Rows(int64_t n, const void* w, int64_t groups, const ActRows& act, float* out,
                       int64_t out_stride);

}  // namespace pagoda::kernels::quant
