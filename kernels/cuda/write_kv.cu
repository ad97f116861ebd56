#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/write_kv.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// blockIdx.y picks the token (in chunks of 65535), blockIdx.x a span of the row.
template <typename T, typename C>
__global__ void __launch_bounds__(kThreads) WriteKvKernel(const WriteKvParams p, int64_t tok0) {
  const int64_t i = tok0 + blockIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int32_t slot = p.slot_mapping[i];
  if (slot < 0 || c >= p.width) return;
  const int64_t dst = static_cast<int64_t>(slot) * p.width + c;
  if constexpr (std::is_same_v<T, C>) {
    static_cast<C*>(p.k_plane)[dst] = static_cast<const T*>(p.k)[i * p.k_stride + c];
    static_cast<C*>(p.v_plane)[dst] = static_cast<const T*>(p.v)[i * p.v_stride + c];
  } else {
    const float k = ToF32(static_cast<const T*>(p.k)[i * p.k_stride + c]);
    const float v = ToF32(static_cast<const T*>(p.v)[i * p.v_stride + c]);
    static_cast<C*>(p.k_plane)[dst] = FromF32<C>(k * p.inv_scale);
    static_cast<C*>(p.v_plane)[dst] = FromF32<C>(v * p.inv_scale);
  }
}

}  // namespace

cudaError_t LaunchWriteKv(const WriteKvParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0 || p.width == 0) return cudaSuccess;
  const unsigned col_blocks = static_cast<unsigned>((p.width + kThreads - 1) / kThreads);
  bool ok = false;
  DispatchDType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    ok = DispatchKvDType(p.kv_dtype, [&](auto cache_tag) {
      using C = decltype(cache_tag);
      for (int64_t t0 = 0; t0 < p.num_tokens; t0 += 65535) {
        const unsigned n =
            static_cast<unsigned>(p.num_tokens - t0 < 65535 ? p.num_tokens - t0 : 65535);
        WriteKvKernel<T, C><<<dim3(col_blocks, n), kThreads, 0, stream>>>(p, t0);
      }
    });
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace pagoda::kernels::cuda
