#include <cfloat>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/softmax.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row: max, then sum of exponentials, then the normalized write.
__global__ void __launch_bounds__(kThreads) SoftmaxKernel(const SoftmaxParams p) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const float inv_t = 1.f / p.temperature;
  float mx = -FLT_MAX;
  for (int64_t c = threadIdx.x; c < p.cols; c += kThreads) {
    mx = fmaxf(mx, LoadAny(p.x, p.dtype, row * p.x_stride + c) * inv_t);
  }
  mx = WarpMax(mx);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = mx;
  __syncthreads();
  mx = (threadIdx.x & 31) < kThreads / 32 ? scratch[threadIdx.x & 31] : -FLT_MAX;
  mx = WarpMax(mx);
  float* out = p.out + row * p.out_stride;
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < p.cols; c += kThreads) {
    const float e = expf(LoadAny(p.x, p.dtype, row * p.x_stride + c) * inv_t - mx);
    out[c] = e;
    sum += e;
  }
  sum = BlockSum(sum, scratch);
  const float inv = 1.f / sum;
  for (int64_t c = threadIdx.x; c < p.cols; c += kThreads) out[c] *= inv;
}

}  // namespace

cudaError_t LaunchSoftmax(const SoftmaxParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  SoftmaxKernel<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace pagoda::kernels::cuda
