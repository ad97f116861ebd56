#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/rope.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 128;

// YaRN's blend weight of pair i (see the CPU backend's YarnRamp).
__device__ __forceinline__ float YarnRamp(float low, float high, int pair) {
  const float y = __fdiv_rn(__fsub_rn(static_cast<float>(pair), low), fmaxf(0.001f, high - low));
  const float clamped_low = 0.f > y ? 0.f : y;
  return 1.f - (1.f < clamped_low ? 1.f : clamped_low);
}

// One block per token row. The angles are pos * theta_scale^i built by i successive fp32
// multiplications and combined with explicitly rounded operations (no fused multiply-add),
// the same sequence of roundings the CPU backend performs, so both agree to the last bit
// before cos/sin even at large positions.
template <typename T>
__global__ void __launch_bounds__(kThreads) RopeKernel(const RopeLaunchParams p) {
  extern __shared__ float cos_sin[];  // [rope_dim / 2][2]
  const int64_t row = blockIdx.x;
  const int half = p.rope_dim / 2;
  for (int i = threadIdx.x; i < half; i += kThreads) {
    float theta = static_cast<float>(p.positions[row]);
    for (int j = 0; j < i; ++j) theta = __fmul_rn(theta, p.theta_scale);
    const float extrap = p.freq_factors != nullptr ? __fdiv_rn(theta, p.freq_factors[i]) : theta;
    const float interp = __fmul_rn(p.freq_scale, extrap);
    float angle = interp;
    if (p.ext_factor != 0.f) {
      const float mix = __fmul_rn(YarnRamp(p.corr_low, p.corr_high, i), p.ext_factor);
      angle = __fadd_rn(__fmul_rn(interp, __fsub_rn(1.f, mix)), __fmul_rn(extrap, mix));
    }
    cos_sin[2 * i] = __fmul_rn(cosf(angle), p.mscale);
    cos_sin[2 * i + 1] = __fmul_rn(sinf(angle), p.mscale);
  }
  __syncthreads();
  T* q = static_cast<T*>(p.q) + row * p.q_stride;
  T* k = static_cast<T*>(p.k) + row * p.k_stride;
  const int step = p.neox ? 1 : 2;
  const int offset = p.neox ? half : 1;
  const int pairs = (p.num_heads + p.num_kv_heads) * half;
  for (int idx = threadIdx.x; idx < pairs; idx += kThreads) {
    const int head = idx / half;
    const int i = idx % half;
    T* v = head < p.num_heads ? q + static_cast<int64_t>(head) * p.head_dim
                              : k + static_cast<int64_t>(head - p.num_heads) * p.head_dim;
    T* a = v + i * step;
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    const float x0 = ToF32(a[0]);
    const float x1 = ToF32(a[offset]);
    a[0] = FromF32<T>(x0 * c - x1 * s);
    a[offset] = FromF32<T>(x0 * s + x1 * c);
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
