#include <cfloat>

#include "kernels/cuda/argmax.cuh"
#include "kernels/cuda/cuda_common.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// True when (v, i) ranks before (best_v, best_i): larger value, or equal value and lower index.
__device__ __forceinline__ bool Better(float v, int64_t i, float best_v, int64_t best_i) {
  return v > best_v || (v == best_v && i < best_i);
}

// One block per row; each thread scans a strided slice, then warps and the block reduce.
__global__ void __launch_bounds__(kThreads) ArgmaxKernel(const ArgmaxParams p) {
  __shared__ float s_val[kThreads / 32];
  __shared__ int64_t s_idx[kThreads / 32];
  const int64_t row = blockIdx.x;
  float best_v = -FLT_MAX;
  int64_t best_i = p.cols;  // ranks after every real index
  for (int64_t c = threadIdx.x; c < p.cols; c += kThreads) {
    const float v = LoadAny(p.x, p.dtype, row * p.stride + c);
    if (Better(v, c, best_v, best_i)) {  // false for NaN
      best_v = v;
      best_i = c;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best_v, offset);
    const int64_t i = __shfl_xor_sync(0xffffffffu, best_i, offset);
    if (Better(v, i, best_v, best_i)) {
      best_v = v;
      best_i = i;
    }
  }
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) {
    s_val[warp] = best_v;
    s_idx[warp] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      if (Better(s_val[w], s_idx[w], best_v, best_i)) {
        best_v = s_val[w];
        best_i = s_idx[w];
      }
    }
    // A row of NaNs (or no columns) yields 0 rather than an out-of-range id.
    p.out[row] = static_cast<int32_t>(best_i < p.cols ? best_i : 0);
  }
}

}  // namespace

cudaError_t LaunchArgmax(const ArgmaxParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  ArgmaxKernel<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace pagoda::kernels::cuda
