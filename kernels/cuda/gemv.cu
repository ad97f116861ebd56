#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gemv.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kWarps = 8;   // warps a block: kWarps / slices rows of w (output columns)
constexpr int kUnroll = 4;  // 16-byte weight loads a lane has in flight

// Sum of the products of the 8 elements in `a` and `b`.
template <typename T>
__device__ __forceinline__ float Dot8(const uint4& a, const uint4& b) {
  const T* x = reinterpret_cast<const T*>(&a);
  const T* y = reinterpret_cast<const T*>(&b);
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s = fmaf(ToF32(x[j]), ToF32(y[j]), s);
  return s;
}

// A row of w is read by `slices` warps of one block (1, 2, 4 or 8; a matrix of few rows
// still gives every multiprocessor several warps), slice s taking the 16-byte pieces
// lane + 32 (s + slices i). Each lane keeps kUnroll weight loads in flight, multiplies them
// with the same pieces of every x row; the warps' sums meet in shared memory.
template <typename T, typename OutT, int kN>
__global__ void __launch_bounds__(kWarps * 32) GemvKernel(const GemvParams p, int slices) {
  __shared__ float partial[kWarps][kN];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int slice = warp % slices;
  const int64_t row = int64_t{blockIdx.x} * (kWarps / slices) + warp / slices;
  const bool active = row < p.m;
  float acc[kN];
#pragma unroll
  for (int n = 0; n < kN; ++n) acc[n] = 0.f;
  if (active) {
    const auto* w = reinterpret_cast<const uint4*>(static_cast<const T*>(p.w) + row * p.w_stride);
    const uint4* x[kN];
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      x[n] = reinterpret_cast<const uint4*>(static_cast<const T*>(p.x) + n * p.x_stride);
    }
    const int64_t pieces = p.k / 8;
    const int64_t stride = 32 * int64_t{slices};
    int64_t c = lane + 32 * int64_t{slice};
    for (; c + stride * (kUnroll - 1) < pieces; c += stride * kUnroll) {
      uint4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(w + c + stride * u);  // read once
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int n = 0; n < kN; ++n) acc[n] += Dot8<T>(wv[u], __ldg(x[n] + c + stride * u));
      }
    }
    for (; c < pieces; c += stride) {
      const uint4 wv = __ldcs(w + c);
#pragma unroll
      for (int n = 0; n < kN; ++n) acc[n] += Dot8<T>(wv, __ldg(x[n] + c));
    }
  }
#pragma unroll
  for (int n = 0; n < kN; ++n) {
    const float s = WarpSum(acc[n]);
    if (lane == 0) partial[warp][n] = s;
  }
  __syncthreads();
  if (!active || slice != 0 || lane >= kN) return;
  float s = 0.f;
  for (int i = 0; i < slices; ++i) s += partial[warp + i][lane];
  static_cast<OutT*>(p.out)[lane * p.out_stride + row] = FromF32<OutT>(s);
}

// Warps a row: enough that the grid has about kTargetWarps warps (a few per multiprocessor
// slot), at most all of a block's.
int SlicesFor(int64_t m) {
  constexpr int64_t kTargetWarps = 8192;
  int slices = 1;
  while (slices < kWarps && m * slices < kTargetWarps) slices *= 2;
  return slices;
}

template <typename T, typename OutT>
void Launch(const GemvParams& p, cudaStream_t stream) {
  const int slices = SlicesFor(p.m);
  const int64_t rows_per_block = kWarps / slices;
  const unsigned blocks = static_cast<unsigned>((p.m + rows_per_block - 1) / rows_per_block);
  switch (p.n) {
    case 1:
      GemvKernel<T, OutT, 1><<<blocks, kWarps * 32, 0, stream>>>(p, slices);
      break;
    case 2:
      GemvKernel<T, OutT, 2><<<blocks, kWarps * 32, 0, stream>>>(p, slices);
      break;
    case 3:
      GemvKernel<T, OutT, 3><<<blocks, kWarps * 32, 0, stream>>>(p, slices);
      break;
    default:
      GemvKernel<T, OutT, 4><<<blocks, kWarps * 32, 0, stream>>>(p, slices);
      break;
  }
}

bool Aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

bool GemvApplies(const GemvParams& p) {
  const bool types = (p.dtype == DType::kBF16 || p.dtype == DType::kF16) &&
                     (p.out_dtype == p.dtype || p.out_dtype == DType::kF32);
  return types && p.n >= 1 && p.n <= kMaxGemvRows && p.m >= 1 && p.k >= 8 && p.k % 8 == 0 &&
         p.x_stride % 8 == 0 && p.w_stride % 8 == 0 && Aligned16(p.x) && Aligned16(p.w);
}

cudaError_t LaunchGemv(const GemvParams& p, cudaStream_t stream) {
  if (!GemvApplies(p)) return cudaErrorInvalidValue;
  if (p.dtype == DType::kBF16) {
    if (p.out_dtype == DType::kF32) {
      Launch<__nv_bfloat16, float>(p, stream);
    } else {
      Launch<__nv_bfloat16, __nv_bfloat16>(p, stream);
    }
  } else if (p.out_dtype == DType::kF32) {
    Launch<__half, float>(p, stream);
  } else {
    Launch<__half, __half>(p, stream);
  }
  return cudaGetLastError();
}

}  // namespace pagoda::kernels::cuda
