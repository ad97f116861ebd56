#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/rope.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kPairsPerThread = 4;

// YaRN's blend weight of pair i (see the CPU backend's YarnRamp).
__device__ __forceinline__ float YarnRamp(float low, float high, int pair) {
  const float y = __fdiv_rn(__fsub_rn(static_cast<float>(pair), low), fmaxf(0.001f, high - low));
  const float clamped_low = 0.f > y ? 0.f : y;
  return 1.f - (1.f < clamped_low ? 1.f : clamped_low);
}

// Blocks of (token row, group of kThreads * kPairsPerThread rotated pairs); each block loads
// its pairs, then builds the row's cos/sin table in shared memory. The angles are
// pos * theta_scale^i built by i successive fp32 multiplications and combined with
// explicitly rounded operations (no fused multiply-add), the same sequence of roundings the
// CPU backend performs, so both agree to the last bit before cos/sin even at large positions.
template <typename T>
__global__ void __launch_bounds__(kThreads) RopeKernel(const RopeLaunchParams p) {
  extern __shared__ float cos_sin[];  // [rope_dim / 2][2]
  const int64_t row = blockIdx.x;
  const int half = p.rope_dim / 2;
  T* q = static_cast<T*>(p.q) + row * p.q_stride;
  T* k = static_cast<T*>(p.k) + row * p.k_stride;
  const int step = p.neox ? 1 : 2;
  const int offset = p.neox ? half : 1;
  const int pairs = (p.num_heads + p.num_kv_heads) * half;
  // This block's pairs: kPairsPerThread per thread, all loaded before any is stored (a loop
  // of load-then-store would wait for each load in turn).
  T* a[kPairsPerThread];
  T x0[kPairsPerThread], x1[kPairsPerThread];
#pragma unroll
  for (int j = 0; j < kPairsPerThread; ++j) {
    const int idx = (blockIdx.y * kPairsPerThread + j) * kThreads + threadIdx.x;
    a[j] = nullptr;
    if (idx >= pairs) continue;
    const int head = idx / half;
    const int i = idx % half;
    T* v = head < p.num_heads ? q + static_cast<int64_t>(head) * p.head_dim
                              : k + static_cast<int64_t>(head - p.num_heads) * p.head_dim;
    a[j] = v + i * step;
    x0[j] = a[j][0];
    x1[j] = a[j][offset];
  }
  // The cos/sin table while the loads are in flight.
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
#pragma unroll
  for (int j = 0; j < kPairsPerThread; ++j) {
    if (a[j] == nullptr) continue;
    const int i = ((blockIdx.y * kPairsPerThread + j) * kThreads + threadIdx.x) % half;
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    const float v0 = ToF32(x0[j]);
    const float v1 = ToF32(x1[j]);
    a[j][0] = FromF32<T>(v0 * c - v1 * s);
    a[j][offset] = FromF32<T>(v0 * s + v1 * c);
  }
}

}  // namespace

cudaError_t LaunchRope(const RopeLaunchParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.rope_dim < 2) return cudaSuccess;
  const size_t smem = sizeof(float) * static_cast<size_t>(p.rope_dim);
  const bool ok = DispatchDType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int pairs = (p.num_heads + p.num_kv_heads) * (p.rope_dim / 2);
    const int groups = (pairs + kThreads * kPairsPerThread - 1) / (kThreads * kPairsPerThread);
    RopeKernel<T><<<dim3(static_cast<unsigned>(p.rows), static_cast<unsigned>(groups)), kThreads,
                    smem, stream>>>(p);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace pagoda::kernels::cuda
