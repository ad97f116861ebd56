#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/silu_mul.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// blockIdx.y picks the row (in chunks of 65535 rows), blockIdx.x a span of columns.
template <typename T>
__global__ void __launch_bounds__(kThreads) SiluMulKernel(const SiluMulParams p, int64_t row0) {
  const int64_t r = row0 + blockIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= p.cols) return;
  const float g = ToF32(static_cast<const T*>(p.gate)[r * p.gate_stride + c]);
  const float u = ToF32(static_cast<const T*>(p.up)[r * p.up_stride + c]);
  static_cast<T*>(p.out)[r * p.out_stride + c] = FromF32<T>(g / (1.f + expf(-g)) * u);
}

}  // namespace

cudaError_t LaunchSiluMul(const SiluMulParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.cols == 0) return cudaSuccess;
  const unsigned col_blocks = static_cast<unsigned>((p.cols + kThreads - 1) / kThreads);
  const bool ok = DispatchDType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t row0 = 0; row0 < p.rows; row0 += 65535) {
      const unsigned n = static_cast<unsigned>(p.rows - row0 < 65535 ? p.rows - row0 : 65535);
      SiluMulKernel<T><<<dim3(col_blocks, n), kThreads, 0, stream>>>(p, row0);
    }
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace pagoda::kernels::cuda
