#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/rope.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 128;

// One block per token row. The angles are pos * theta_scale^i built by i successive fp32
// multiplications, the same sequence of roundings the CPU backend performs, so both agree
// to the last bit before cos/sin even at large positions.
template <typename T>
__global__ void __launch_bounds__(kThreads) RopeKernel(const RopeLaunchParams p) {
  extern __shared__ float cos_sin[];  // [rope_dim / 2][2]
  const int64_t row = blockIdx.x;
  const int half = p.rope_dim / 2;
  for (int i = threadIdx.x; i < half; i += kThreads) {
    float theta = static_cast<float>(p.positions[row]);
    for (int j = 0; j < i; ++j) theta *= p.theta_scale;
    cos_sin[2 * i] = cosf(theta);
    cos_sin[2 * i + 1] = sinf(theta);
  }
  __syncthreads();
  T* q = static_cast<T*>(p.q) + row * p.q_stride;
  T* k = static_cast<T*>(p.k) + row * p.k_stride;
  const int pairs = (p.num_heads + p.num_kv_heads) * half;
  for (int idx = threadIdx.x; idx < pairs; idx += kThreads) {
    const int head = idx / half;
    const int i = idx % half;
    T* v = head < p.num_heads ? q + static_cast<int64_t>(head) * p.head_dim
                              : k + static_cast<int64_t>(head - p.num_heads) * p.head_dim;
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    const float x0 = ToF32(v[2 * i]);
    const float x1 = ToF32(v[2 * i + 1]);
    v[2 * i] = FromF32<T>(x0 * c - x1 * s);
    v[2 * i + 1] = FromF32<T>(x0 * s + x1 * c);
  }
}

}  // namespace

cudaError_t LaunchRope(const RopeLaunchParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.rope_dim < 2) return cudaSuccess;
  const size_t smem = sizeof(float) * static_cast<size_t>(p.rope_dim);
  const bool ok = DispatchDType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    RopeKernel<T><<<static_cast<unsigned>(p.rows), kThreads, smem, stream>>>(p);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace pagoda::kernels::cuda
