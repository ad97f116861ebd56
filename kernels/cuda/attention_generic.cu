// The CUDA-core paged-attention kernel: every activation type over every KV cache type (the
// activation types and fp8 e4m3, widened to fp32 as read, times kv_scale), any head_dim up
// to 256. It is the exact (fp32) path and the fallback for shapes and cache types the
// tensor-core kernels do not cover.
//
// One warp per (plan item, query head); lane i holds dims i, i + 32, ... of the head. Keys
// go four at a time (four independent dot products, their warp sums interleaved) through
// an online softmax in fp32.
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/cuda_common.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kLaneDims = 8;  // head_dim <= 32 * kLaneDims
constexpr int kKeysPerStep = 4;
constexpr float kNegInfinity = -__builtin_huge_valf();

// Writes one warp's result for query head `head` of `item`: acc / l to the output row, or to
// the item's partial row together with (m, l).
template <typename T>
__device__ __forceinline__ void StoreResult(const PagedAttentionParams& p,
                                            const AttentionItem& item, int head, int lane,
                                            const float (&acc)[kLaneDims], float m, float l) {
  const int hd = p.head_dim;
  const float inv_l = p.kv_scale / l;  // V was read unscaled
  if (item.partial < 0) {
    T* out = static_cast<T*>(p.out) + static_cast<int64_t>(item.token) * p.out_stride +
             static_cast<int64_t>(head) * hd;
#pragma unroll
    for (int j = 0; j < kLaneDims; ++j) {
      const int d = lane + 32 * j;
      if (d < hd) out[d] = FromF32<T>(acc[j] * inv_l);
    }
  } else {
    const int64_t prow = static_cast<int64_t>(item.partial) * p.num_heads + head;
#pragma unroll
    for (int j = 0; j < kLaneDims; ++j) {
      const int d = lane + 32 * j;
      if (d < hd) p.partial_out[prow * hd + d] = acc[j] * inv_l;
    }
    if (lane == 0) {
      p.partial_ml[2 * prow] = m;
      p.partial_ml[2 * prow + 1] = l;
    }
  }
}

template <typename T, typename C>
__global__ void __launch_bounds__(kWarps * 32)
    GenericAttentionKernel(const PagedAttentionParams p) {
  const int64_t warp_id = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (warp_id >= static_cast<int64_t>(p.num_items) * p.num_heads) return;  // whole warps
  const int lane = threadIdx.x & 31;
  const AttentionItem item = p.items[warp_id / p.num_heads];
  if (item.token < 0) return;  // padding (PadPlanForGraphs)
  const int head = static_cast<int>(warp_id % p.num_heads);
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int hd = p.head_dim;

  const T* q = static_cast<const T*>(p.q) + static_cast<int64_t>(item.token) * p.q_stride +
               static_cast<int64_t>(head) * hd;
  float qv[kLaneDims];
#pragma unroll
  for (int j = 0; j < kLaneDims; ++j) {
    const int d = lane + 32 * j;
    qv[j] = d < hd ? ToF32(q[d]) * (p.scale_log2 * p.kv_scale) : 0.f;  // K is read unscaled
  }
  const C* k_plane = static_cast<const C*>(p.k_cache);
  const C* v_plane = static_cast<const C*>(p.v_cache);
  const int32_t* table = p.block_tables + static_cast<int64_t>(item.seq) * p.max_blocks_per_seq;
  const int64_t slot_stride = static_cast<int64_t>(p.num_kv_heads) * hd;
  const int64_t head_offset = static_cast<int64_t>(kv_head) * hd;
  const int mask = (1 << p.log2_block_size) - 1;

  float acc[kLaneDims];
#pragma unroll
  for (int j = 0; j < kLaneDims; ++j) acc[j] = 0.f;
  float m = kNegInfinity;
  float l = 0.f;
  for (int base = item.kv_begin; base < item.kv_end; base += kKeysPerStep) {
    int64_t row[kKeysPerStep];  // element offset of the key's row, -1 past kv_end
    float s[kKeysPerStep];
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      const int pos = base + u;
      row[u] = -1;
      s[u] = 0.f;
      if (pos < item.kv_end) {
        const int64_t slot =
            (static_cast<int64_t>(table[pos >> p.log2_block_size]) << p.log2_block_size) +
            (pos & mask);
        row[u] = slot * slot_stride + head_offset;
#pragma unroll
        for (int j = 0; j < kLaneDims; ++j) {
          const int d = lane + 32 * j;
          if (d < hd) s[u] += qv[j] * ToF32(k_plane[row[u] + d]);
        }
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
#pragma unroll
      for (int u = 0; u < kKeysPerStep; ++u) s[u] += __shfl_xor_sync(0xffffffffu, s[u], offset);
    }
    float mx = m;
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      if (row[u] < 0) s[u] = kNegInfinity;
      mx = fmaxf(mx, s[u]);
    }
    // mx is finite: position `base` is always valid.
    const float corr = exp2f(m - mx);
    l *= corr;
#pragma unroll
    for (int j = 0; j < kLaneDims; ++j) acc[j] *= corr;
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      if (row[u] < 0) continue;
      const float pu = exp2f(s[u] - mx);
      l += pu;
#pragma unroll
      for (int j = 0; j < kLaneDims; ++j) {
        const int d = lane + 32 * j;
        if (d < hd) acc[j] += pu * ToF32(v_plane[row[u] + d]);
      }
    }
    m = mx;
  }

  StoreResult<T>(p, item, head, lane, acc, m, l);
}

}  // namespace

cudaError_t LaunchGenericAttention(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.head_dim > 32 * kLaneDims) return cudaErrorInvalidValue;
  const int64_t warps = static_cast<int64_t>(p.num_items) * p.num_heads;
  if (warps == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((warps + kWarps - 1) / kWarps);
  bool ok = false;
  DispatchDType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    ok = DispatchKvDType(p.kv_dtype, [&](auto cache_tag) {
      using C = decltype(cache_tag);
      GenericAttentionKernel<T, C><<<blocks, kWarps * 32, 0, stream>>>(p);
    });
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace pagoda::kernels::cuda
