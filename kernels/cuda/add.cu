#include "kernels/cuda/add.cuh"
#include "kernels/cuda/cuda_common.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// blockIdx.y picks the row (in chunks of 65535 rows), blockIdx.x a span of columns.
template <typename T>
__global__ void __launch_bounds__(kThreads) AddKernel(const AddParams p, int64_t row0) {
  const int64_t r = row0 + blockIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= p.cols) return;
  T* x = static_cast<T*>(p.x) + r * p.x_stride + c;
  const float y = ToF32(static_cast<const T*>(p.y)[r * p.y_stride + c]);
  *x = FromF32<T>(ToF32(*x) + y);
}

// The same grid as AddKernel; y is one f32 row shared by every row of x.
template <typename T>
__global__ void __launch_bounds__(kThreads) AddBiasKernel(const AddBiasParams p, int64_t row0) {
  const int64_t r = row0 + blockIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= p.cols) return;
  T* x = static_cast<T*>(p.x) + r * p.x_stride + c;
  *x = FromF32<T>(ToF32(*x) + p.bias[c]);
}

}  // namespace

namespace {

// Launches `Kernel<T>` over a [rows, cols] grid (one thread per element, columns in blocks
// of kThreads), in chunks of at most 65535 rows, the grid's y limit. `Params` needs rows,
// cols and dtype.
template <template <typename> class Launcher, typename Params>
cudaError_t LaunchRowChunks(const Params& p, cudaStream_t stream) {
  if (p.rows == 0 || p.cols == 0) return cudaSuccess;
  const unsigned col_blocks = static_cast<unsigned>((p.cols + kThreads - 1) / kThreads);
  const bool ok = DispatchDType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t row0 = 0; row0 < p.rows; row0 += 65535) {
      const unsigned n = static_cast<unsigned>(p.rows - row0 < 65535 ? p.rows - row0 : 65535);
      Launcher<T>::Run(dim3(col_blocks, n), stream, p, row0);
    }
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

template <typename T>
struct AddLauncher {
  static void Run(dim3 grid, cudaStream_t stream, const AddParams& p, int64_t row0) {
    AddKernel<T><<<grid, kThreads, 0, stream>>>(p, row0);
  }
};

template <typename T>
struct AddBiasLauncher {
  static void Run(dim3 grid, cudaStream_t stream, const AddBiasParams& p, int64_t row0) {
    AddBiasKernel<T><<<grid, kThreads, 0, stream>>>(p, row0);
  }
};

}  // namespace

cudaError_t LaunchAdd(const AddParams& p, cudaStream_t stream) {
  return LaunchRowChunks<AddLauncher>(p, stream);
}

cudaError_t LaunchAddBias(const AddBiasParams& p, cudaStream_t stream) {
  return LaunchRowChunks<AddBiasLauncher>(p, stream);
}

}  // namespace pagoda::kernels::cuda
