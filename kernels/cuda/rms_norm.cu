#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/rms_norm.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row: a block-wide sum of squares, then a scaled copy.
template <typename T>
__global__ void __launch_bounds__(kThreads) RmsNormKernel(const RmsNormParams p) {
  __shared__ float scratch[32];
  const T* x = static_cast<const T*>(p.x) + static_cast<int64_t>(blockIdx.x) * p.x_stride;
  const T* w = static_cast<const T*>(p.weight);
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(blockIdx.x) * p.out_stride;
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < p.cols; c += kThreads) {
    const float v = ToF32(x[c]);
    sum += v * v;
  }
  sum = BlockSum(sum, scratch);
  const float scale = 1.f / sqrtf(sum / static_cast<float>(p.cols) + p.eps);
  // Each thread rereads only the elements it read above, so out may alias x.
  for (int64_t c = threadIdx.x; c < p.cols; c += kThreads) {
    out[c] = FromF32<T>(ToF32(x[c]) * scale * ToF32(w[c]));
  }
}

}  // namespace

cudaError_t LaunchRmsNorm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  const bool ok = DispatchDType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    RmsNormKernel<T><<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace pagoda::kernels::cuda
