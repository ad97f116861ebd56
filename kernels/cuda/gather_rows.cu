#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gather_rows.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// blockIdx.y picks the output row (in chunks of 65535 rows), blockIdx.x a span of columns.
// The element types are run-time values: a uniform branch per element costs little in a
// copy that memory bandwidth bounds.
__global__ void __launch_bounds__(kThreads)
    GatherRowsKernel(const GatherRowsParams p, int64_t row0) {
  const int64_t r = row0 + blockIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= p.cols) return;
  const int64_t src = p.indices != nullptr ? p.indices[r] : r;
  StoreAny(p.out, p.out_dtype, r * p.out_stride + c,
           LoadAny(p.in, p.in_dtype, src * p.in_stride + c));
}

}  // namespace

cudaError_t LaunchGatherRows(const GatherRowsParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.cols == 0) return cudaSuccess;
  const unsigned col_blocks = static_cast<unsigned>((p.cols + kThreads - 1) / kThreads);
  for (int64_t row0 = 0; row0 < p.rows; row0 += 65535) {
    const unsigned n = static_cast<unsigned>(p.rows - row0 < 65535 ? p.rows - row0 : 65535);
    GatherRowsKernel<<<dim3(col_blocks, n), kThreads, 0, stream>>>(p, row0);
  }
  return cudaGetLastError();
}

}  // namespace pagoda::kernels::cuda
