// K/V tiles of an fp8 e4m3 cache for the tensor-core attention kernels (device code, sm_80+).
// The raw bytes travel global -> shared with cp.async as the 16-bit tiles do, at half their
// size; once a tile has landed, each thread converts the pieces it copied (value * scale,
// rounded to the activation type T) into the swizzled T tile the mma code reads. So the
// kernels read an fp8 cache's bytes once, with the same GQA sharing as a 16-bit cache.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/attention_mma.cuh"

namespace pagoda::kernels::cuda {

// Elements of one 16-byte piece of an fp8 row, and the 8-element T chunks it becomes.
constexpr int kFp8PieceElems = 16;
constexpr int kFp8PieceChunks = kFp8PieceElems / 8;

// Starts the copy of the fp8 K and V of positions [base, base + kTileN) into the raw tiles
// rk / rv ([kTileN][kHeadDim] bytes, unswizzled), spread over kThreads threads (this one is
// `tid`): piece i (16 bytes) goes to bytes 16 i. Positions >= end become zero bytes (+0).
// The caller commits the group.
template <int kHeadDim, int kTileN, int kThreads>
__device__ __forceinline__ void LoadFp8KvTile(uint8_t* rk, uint8_t* rv, const KvSource& src,
                                              int base, int end, int tid) {
  constexpr int kPiecesPerRow = kHeadDim / kFp8PieceElems;
  constexpr int kPieces = kTileN * kPiecesPerRow;
  static_assert(kPieces % kThreads == 0, "tile copy must divide evenly over the threads");
  const auto* k_plane = static_cast<const uint8_t*>(src.k_plane);
  const auto* v_plane = static_cast<const uint8_t*>(src.v_plane);
#pragma unroll
  for (int it = 0; it < kPieces / kThreads; ++it) {
    const int i = tid + it * kThreads;
    const int pos = base + i / kPiecesPerRow;
    const bool valid = pos < end;
    const int64_t offset = valid ? src.RowOffset(pos) + (i % kPiecesPerRow) * kFp8PieceElems : 0;
    CpAsync16(SmemAddr(rk + kFp8PieceElems * i), k_plane + offset, valid ? 16 : 0);
    CpAsync16(SmemAddr(rv + kFp8PieceElems * i), v_plane + offset, valid ? 16 : 0);
  }
}

// Two e4m3 values (the lower byte first) times `scale`, packed as T's A/B register does.
template <typename T>
__device__ __forceinline__ uint32_t Fp8PairToPacked(uint32_t pair, float scale) {
  const __half2 h(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3));
  const float2 f = __half22float2(h);
  return Mma<T>::Pack(f.x * scale, f.y * scale);
}

// Converts the pieces this thread copied with LoadFp8KvTile<kHeadDim, kTileN, kThreads>(...,
// tid) from the raw tiles rk / rv into the swizzled T tiles sk / sv. Needs only this
// thread's own copies to have landed; the T tiles need a barrier before others read them.
template <typename T, int kHeadDim, int kTileN, int kThreads>
__device__ __forceinline__ void ConvertFp8KvTile(T* sk, T* sv, const uint8_t* rk, const uint8_t* rv,
                                                 float scale, int tid) {
  constexpr int kPiecesPerRow = kHeadDim / kFp8PieceElems;
  constexpr int kPieces = kTileN * kPiecesPerRow;
#pragma unroll
  for (int it = 0; it < kPieces / kThreads; ++it) {
    const int i = tid + it * kThreads;
    const int row = i / kPiecesPerRow;
    const int piece = i % kPiecesPerRow;
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const uint4 raw = *reinterpret_cast<const uint4*>((kv == 0 ? rk : rv) + kFp8PieceElems * i);
      const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
      T* tile = kv == 0 ? sk : sv;
#pragma unroll
      for (int c = 0; c < kFp8PieceChunks; ++c) {
        // Chunk c holds elements 8c..8c+7 of the piece: words 2c and 2c + 1, two pairs each.
        uint4 out;
        out.x = Fp8PairToPacked<T>(words[2 * c] & 0xffffu, scale);
        out.y = Fp8PairToPacked<T>(words[2 * c] >> 16, scale);
        out.z = Fp8PairToPacked<T>(words[2 * c + 1] & 0xffffu, scale);
        out.w = Fp8PairToPacked<T>(words[2 * c + 1] >> 16, scale);
        *reinterpret_cast<uint4*>(tile + Swizzle<kHeadDim>(row, kFp8PieceChunks * piece + c)) = out;
      }
    }
  }
}

}  // namespace pagoda::kernels::cuda
