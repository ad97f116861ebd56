// The split-KV reduction: merges the partial results of a token's context partitions.
//
// Partition i of a token left O_i (normalized by its own sum), m_i (max score, log2 units)
// and l_i (sum of 2^(s - m_i)). With M = max m_i and w_i = l_i * 2^(m_i - M), the full
// result is sum_i w_i O_i / sum_i w_i.
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/cuda_common.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 128;

// Grid: x = split token, y = query head.
template <typename T>
__global__ void __launch_bounds__(kThreads) SplitReduceKernel(const PagedAttentionParams p) {
  const SplitToken sp = p.splits[blockIdx.x];
  if (sp.token < 0) return;  // padding (PadPlanForGraphs)
  const int head = blockIdx.y;
  const int hd = p.head_dim;
  auto prow = [&](int i) {
    return static_cast<int64_t>(sp.first_partial + i) * p.num_heads + head;
  };
  float m = -__builtin_huge_valf();
  for (int i = 0; i < sp.num_partials; ++i) m = fmaxf(m, p.partial_ml[2 * prow(i)]);
  float l = 0.f;
  for (int i = 0; i < sp.num_partials; ++i) {
    l += p.partial_ml[2 * prow(i) + 1] * exp2f(p.partial_ml[2 * prow(i)] - m);
  }
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(sp.token) * p.out_stride +
           static_cast<int64_t>(head) * hd;
  for (int d = threadIdx.x; d < hd; d += kThreads) {
    float o = 0.f;
    for (int i = 0; i < sp.num_partials; ++i) {
      const float w = p.partial_ml[2 * prow(i) + 1] * exp2f(p.partial_ml[2 * prow(i)] - m);
      o += w * p.partial_out[prow(i) * hd + d];
    }
    out[d] = FromF32<T>(o / l);
  }
}

}  // namespace

cudaError_t LaunchSplitReduce(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.num_splits == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(p.num_splits), static_cast<unsigned>(p.num_heads));
  const bool ok = DispatchDType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    SplitReduceKernel<T><<<grid, kThreads, 0, stream>>>(p);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace pagoda::kernels::cuda
