// Tensor-core decode attention kernel template (instantiated per dtype in
// attention_decode_tc_{bf16,f16}.cu).
//
// Grid: x = plan item (one decode token over [kv_begin, kv_end)), y = KV head * head chunks.
// A block of 4 warps handles up to 16 query heads that share one KV head (GQA: every K/V
// row is read once for all of them), as the 16 rows of one mma tile. The warps split the
// item's positions into 16-token tiles (warp w takes tiles w, w + 4, ...), each streaming its
// tiles through its own double-buffered shared memory with cp.async, and keep independent
// softmax states that the block merges at the end. kFp8: the cache is fp8 e4m3; the warp's
// double buffers hold its raw bytes, converted into one T tile each of K and V before use
// (attention_kv_convert.cuh).
#pragma once

#include <atomic>

#include "kernels/cuda/attention_kv_convert.cuh"
#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_attention.cuh"

namespace pagoda::kernels::cuda {

constexpr int kDecodeWarps = 4;
constexpr int kDecodeTile = 16;

// Dynamic shared memory of one block: per warp, K and V tiles in two stages (kFp8: raw
// fp8 tiles in two stages, then one T tile each of K and V).
template <typename T, int kHeadDim, bool kFp8>
__host__ __device__ constexpr int DecodeTcSmemBytes() {
  constexpr int kTileElems = kDecodeTile * kHeadDim;
  return kDecodeWarps * (kFp8 ? 4 * kTileElems + 2 * kTileElems * static_cast<int>(sizeof(T))
                              : 4 * kTileElems * static_cast<int>(sizeof(T)));
}

// Writes this warp's rows (m, l already quad-summed, unnormalized O) as fp32 into `dst`:
// o [16][kHeadDim], then m [16], then l [16].
template <int kHeadDim>
__device__ __forceinline__ void StoreWarpState(const WarpState<kHeadDim>& st, float* dst,
                                               int lane) {
  const int g = lane >> 2;
  const int t = lane & 3;
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dst[(g + 8 * (e >> 1)) * kHeadDim + 8 * j + 2 * t + (e & 1)] = st.o[j][e];
    }
  }
  if (t == 0) {
    dst[16 * kHeadDim + g] = st.m[0];
    dst[16 * kHeadDim + g + 8] = st.m[1];
    dst[16 * kHeadDim + 16 + g] = st.l[0];
    dst[16 * kHeadDim + 16 + g + 8] = st.l[1];
  }
}

// Merges the block's four warp states (StoreWarpState layout, kStateFloats apart) for the
// first `rows` query heads from head0, and writes the result: the output row, or the
// item's partial row with its (m, l).
template <typename T, int kHeadDim>
__device__ __forceinline__ void MergeWarpStates(const float* states, const PagedAttentionParams& p,
                                                const AttentionItem& item, int head0, int rows) {
  constexpr int kStateFloats = 16 * kHeadDim + 32;
  for (int i = threadIdx.x; i < rows * kHeadDim; i += kDecodeWarps * 32) {
    const int row = i / kHeadDim;
    const int d = i % kHeadDim;
    float m = kNegInf;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w)
      m = fmaxf(m, states[w * kStateFloats + 16 * kHeadDim + row]);
    float l = 0.f;
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float* s = states + w * kStateFloats;
      // A warp without tiles has m = -inf, l = 0, o = 0: weight 0.
      const float weight = FastExp2(s[16 * kHeadDim + row] - m);
      l += s[16 * kHeadDim + 16 + row] * weight;
      o += s[row * kHeadDim + d] * weight;
    }
    const int head = head0 + row;
    if (item.partial < 0) {
      T* out = static_cast<T*>(p.out) + static_cast<int64_t>(item.token) * p.out_stride;
      out[static_cast<int64_t>(head) * kHeadDim + d] = FromF32<T>(o / l);
    } else {
      const int64_t prow = static_cast<int64_t>(item.partial) * p.num_heads + head;
      p.partial_out[prow * kHeadDim + d] = o / l;
      if (d == 0) {
        p.partial_ml[2 * prow] = m;
        p.partial_ml[2 * prow + 1] = l;
      }
    }
  }
}

template <typename T, int kHeadDim, bool kFp8>
__global__ void __launch_bounds__(kDecodeWarps * 32) DecodeTcKernel(const PagedAttentionParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kTileElems = kDecodeTile * kHeadDim;
  constexpr int kWarpBytes = DecodeTcSmemBytes<T, kHeadDim, kFp8>() / kDecodeWarps;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const AttentionItem item = p.items[blockIdx.x];
  if (item.token < 0) return;  // padding (PadPlanForGraphs): the whole block leaves
  const int group = p.num_heads / p.num_kv_heads;
  const int chunks = (group + 15) / 16;
  const int kv_head = blockIdx.y / chunks;
  const int head0 = kv_head * group + (blockIdx.y % chunks) * 16;  // first query head
  const int rows = min(16, group - (blockIdx.y % chunks) * 16);

  const T* q = static_cast<const T*>(p.q) + static_cast<int64_t>(item.token) * p.q_stride +
               static_cast<int64_t>(head0) * kHeadDim;
  uint32_t qa[kHeadDim / 16][4];
  LoadQFragments<T, kHeadDim>(qa, g < rows ? q + g * kHeadDim : nullptr,
                              g + 8 < rows ? q + (g + 8) * kHeadDim : nullptr, lane);
  const int limit[2] = {g < rows ? item.kv_end - 1 : -1, g + 8 < rows ? item.kv_end - 1 : -1};

  const KvSource src{p.k_cache,
                     p.v_cache,
                     p.block_tables + static_cast<int64_t>(item.seq) * p.max_blocks_per_seq,
                     static_cast<int64_t>(p.num_kv_heads) * kHeadDim,
                     static_cast<int64_t>(kv_head) * kHeadDim,
                     p.log2_block_size};
  // This warp's buffers: K stage 0, K stage 1, V stage 0, V stage 1 (kFp8: K, V, then the
  // raw stages in that order).
  T* buf = reinterpret_cast<T*>(smem + warp * kWarpBytes);
  uint8_t* raw = smem + warp * kWarpBytes + (kFp8 ? 2 * kTileElems * sizeof(T) : 0);
  // Starts the copy of the tile at position `base` into stage `s`.
  const auto load = [&](int s, int base) {
    if constexpr (kFp8) {
      LoadFp8KvTile<kHeadDim, kDecodeTile, 32>(raw + s * kTileElems, raw + (2 + s) * kTileElems,
                                               src, base, item.kv_end, lane);
    } else {
      LoadKvTile<T, kHeadDim, kDecodeTile, 32>(buf + s * kTileElems, buf + (2 + s) * kTileElems,
                                               src, base, item.kv_end, lane);
    }
  };
  WarpState<kHeadDim> st;
  st.Init();
  const int num_tiles = (item.kv_end - item.kv_begin + kDecodeTile - 1) / kDecodeTile;
  if (warp < num_tiles) load(0, item.kv_begin + warp * kDecodeTile);
  CpAsyncCommit();
  int stage = 0;
  for (int tile = warp; tile < num_tiles; tile += kDecodeWarps) {
    const int next = tile + kDecodeWarps;
    if (next < num_tiles) load(stage ^ 1, item.kv_begin + next * kDecodeTile);
    CpAsyncCommit();
    CpAsyncWait<1>();  // the current tile has landed (groups complete in order)
    const T* k_tile = buf + stage * kTileElems;
    const T* v_tile = buf + (2 + stage) * kTileElems;
    if constexpr (kFp8) {
      // Each lane converts the pieces it copied; the last tile's readers are done (below).
      ConvertFp8KvTile<T, kHeadDim, kDecodeTile, 32>(
          buf, buf + kTileElems, raw + stage * kTileElems, raw + (2 + stage) * kTileElems,
          p.kv_scale, lane);
      k_tile = buf;
      v_tile = buf + kTileElems;
    }
    __syncwarp();  // every lane's copies (kFp8: conversions) of the tile are in place
    AttendTile<T, kHeadDim, kDecodeTile>(st, qa, k_tile, v_tile, item.kv_begin + tile * kDecodeTile,
                                         limit, p.scale_log2, lane);
    __syncwarp();  // all lanes are done reading `stage` before it is refilled
    stage ^= 1;
  }
  CpAsyncWait<0>();
  st.FinishSums();
  __syncthreads();  // tiles are dead: reuse the shared memory for the merge

  // Per warp: 16 * kHeadDim + 32 floats, within its kWarpBytes.
  constexpr int kStateFloats = 16 * kHeadDim + 32;
  static_assert(kStateFloats * 4 <= kWarpBytes, "merge state must fit a warp's tiles");
  float* states = reinterpret_cast<float*>(smem);
  StoreWarpState<kHeadDim>(st, states + warp * kStateFloats, lane);
  __syncthreads();

  MergeWarpStates<T, kHeadDim>(states, p, item, head0, rows);
}

// Launches DecodeTcKernel over the plan's items, raising its shared-memory limit first.
template <typename T, int kHeadDim, bool kFp8 = false>
cudaError_t LaunchDecodeTc(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.num_items == 0) return cudaSuccess;
  constexpr int kSmem = DecodeTcSmemBytes<T, kHeadDim, kFp8>();
  // Raised once per device once it has worked: a failed try (say, inside a graph capture
  // that refuses it) is tried again at the next launch instead of being kept.
  static std::atomic<uint64_t> raised{0};  // bit d: device d (devices 0..63)
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device > 63) {
    return cudaErrorInvalidDevice;
  }
  const uint64_t bit = uint64_t{1} << device;
  if ((raised.load(std::memory_order_acquire) & bit) == 0) {
    const cudaError_t attr = cudaFuncSetAttribute(
        DecodeTcKernel<T, kHeadDim, kFp8>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (attr != cudaSuccess) return attr;
    raised.fetch_or(bit, std::memory_order_acq_rel);
  }
  const int group = p.num_heads / p.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(p.num_items),
                  static_cast<unsigned>(p.num_kv_heads * ((group + 15) / 16)));
  DecodeTcKernel<T, kHeadDim, kFp8><<<grid, kDecodeWarps * 32, kSmem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace pagoda::kernels::cuda
