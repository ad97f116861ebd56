// Tensor-core prefill attention kernel template (instantiated per dtype in
// attention_prefill_tc_{bf16,f16}.cu): flash-attention tiling over the paged cache.
//
// Grid: x = plan tile (a few consecutive query tokens of one sequence), y = KV head. The 64
// rows of a block are (token j, query head h of the KV head's group) pairs, row = j * group
// + h, so the group shares every K/V tile; warp w owns rows 16w..16w+15. The block streams
// 32-token K/V tiles of positions [0, kv_end) through double-buffered shared memory with
// cp.async; each row masks positions after its own (causal), and a warp skips tiles that
// start after all of its rows. kFp8: the cache is fp8 e4m3; its raw bytes take the double
// buffers and are converted into one T tile each of K and V before use
// (attention_kv_convert.cuh).
#pragma once

#include "kernels/cuda/attention_kv_convert.cuh"
#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_attention.cuh"

namespace pagoda::kernels::cuda {

constexpr int kPrefillWarps = 4;
static_assert(kPrefillTileRows == 16 * kPrefillWarps, "a warp owns 16 rows of a tile");
constexpr int kPrefillTile = 32;

// Writes O / l of this lane's valid fragment rows (q_row non-null) at out_offset.
template <typename T, int kHeadDim>
__device__ __forceinline__ void StoreRows(const WarpState<kHeadDim>& st,
                                          const PagedAttentionParams& p, const T* const (&q_row)[2],
                                          const int64_t (&out_offset)[2], int lane) {
  const int t = lane & 3;
  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (q_row[r] == nullptr) continue;
    const float inv_l = 1.f / st.l[r];
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      T* dst = out + out_offset[r] + 8 * j + 2 * t;
      dst[0] = FromF32<T>(st.o[j][2 * r] * inv_l);
      dst[1] = FromF32<T>(st.o[j][2 * r + 1] * inv_l);
    }
  }
}

template <typename T, int kHeadDim, bool kFp8>
__global__ void __launch_bounds__(kPrefillWarps * 32)
    PrefillTcKernel(const PagedAttentionParams p) {
  constexpr int kTileElems = kPrefillTile * kHeadDim;
  constexpr int kThreads = kPrefillWarps * 32;
  // T tiles: two stages, or (kFp8) one converted stage beside two stages of raw bytes.
  __shared__ __align__(128) T sk[kFp8 ? 1 : 2][kTileElems];
  __shared__ __align__(128) T sv[kFp8 ? 1 : 2][kTileElems];
  __shared__ __align__(128) uint8_t rk[kFp8 ? 2 : 1][kFp8 ? kTileElems : 16];
  __shared__ __align__(128) uint8_t rv[kFp8 ? 2 : 1][kFp8 ? kTileElems : 16];
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const PrefillTile tile = p.tiles[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;

  // This lane's two fragment rows: their query vectors, output rows and causal limits.
  const T* q_row[2];
  int64_t out_offset[2];
  int limit[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = 16 * warp + g + 8 * r;
    const int j = row / group;
    const int head = kv_head * group + row % group;
    if (j < tile.num_tokens) {
      const int64_t token = tile.token_begin + j;
      q_row[r] =
          static_cast<const T*>(p.q) + token * p.q_stride + static_cast<int64_t>(head) * kHeadDim;
      out_offset[r] = token * p.out_stride + static_cast<int64_t>(head) * kHeadDim;
      limit[r] = p.positions[token];
    } else {
      q_row[r] = nullptr;
      out_offset[r] = 0;
      limit[r] = -1;
    }
  }
  uint32_t qa[kHeadDim / 16][4];
  LoadQFragments<T, kHeadDim>(qa, q_row[0], q_row[1], lane);
  int warp_limit = max(limit[0], limit[1]);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    warp_limit = max(warp_limit, __shfl_xor_sync(0xffffffffu, warp_limit, offset));
  }

  const KvSource src{p.k_cache,
                     p.v_cache,
                     p.block_tables + static_cast<int64_t>(tile.seq) * p.max_blocks_per_seq,
                     static_cast<int64_t>(p.num_kv_heads) * kHeadDim,
                     static_cast<int64_t>(kv_head) * kHeadDim,
                     p.log2_block_size};
  // Starts the copy of the tile at position `base` into stage `s`.
  const auto load = [&](int s, int base) {
    if constexpr (kFp8) {
      LoadFp8KvTile<kHeadDim, kPrefillTile, kThreads>(rk[s], rv[s], src, base, tile.kv_end,
                                                      threadIdx.x);
    } else {
      LoadKvTile<T, kHeadDim, kPrefillTile, kThreads>(sk[s], sv[s], src, base, tile.kv_end,
                                                      threadIdx.x);
    }
  };
  WarpState<kHeadDim> st;
  st.Init();
  const int num_tiles = (tile.kv_end + kPrefillTile - 1) / kPrefillTile;
  load(0, 0);
  CpAsyncCommit();
  for (int i = 0; i < num_tiles; ++i) {
    const int stage = i & 1;
    if (i + 1 < num_tiles) load(stage ^ 1, (i + 1) * kPrefillTile);
    CpAsyncCommit();
    CpAsyncWait<1>();
    if constexpr (kFp8) {
      // Each thread converts the pieces it copied; every warp is done with the last tile.
      ConvertFp8KvTile<T, kHeadDim, kPrefillTile, kThreads>(sk[0], sv[0], rk[stage], rv[stage],
                                                            p.kv_scale, threadIdx.x);
    }
    __syncthreads();  // every thread's copies (kFp8: conversions) of tile i are in place
    const int t_stage = kFp8 ? 0 : stage;
    if (i * kPrefillTile <= warp_limit) {
      AttendTile<T, kHeadDim, kPrefillTile>(st, qa, sk[t_stage], sv[t_stage], i * kPrefillTile,
                                            limit, p.scale_log2, lane);
    }
    __syncthreads();  // every warp is done with `stage` before it is refilled
  }
  CpAsyncWait<0>();
  st.FinishSums();

  StoreRows<T, kHeadDim>(st, p, q_row, out_offset, lane);
}

// Launches PrefillTcKernel over the plan's tiles.
template <typename T, int kHeadDim, bool kFp8 = false>
cudaError_t LaunchPrefillTc(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.num_tiles == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(p.num_tiles), static_cast<unsigned>(p.num_kv_heads));
  PrefillTcKernel<T, kHeadDim, kFp8><<<grid, kPrefillWarps * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace pagoda::kernels::cuda
