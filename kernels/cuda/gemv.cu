#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gemv.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kWarps = 8;   // output columns (rows of w) a block computes, one a warp
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

// One warp a row of w: each lane reads 16-byte pieces 32 apart (kUnroll at once), multiplies
// them with the same pieces of every x row, and the warp sums its lanes.
template <typename T, typename OutT, int kN>
__global__ void __launch_bounds__(kWarps * 32) GemvKernel(const GemvParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5);
  if (row >= p.m) return;
  const auto* w = reinterpret_cast<const uint4*>(static_cast<const T*>(p.w) + row * p.w_stride);
  const uint4* x[kN];
#pragma unroll
  for (int n = 0; n < kN; ++n) {
    x[n] = reinterpret_cast<const uint4*>(static_cast<const T*>(p.x) + n * p.x_stride);
  }
  const int64_t pieces = p.k / 8;
  float acc[kN];
#pragma unroll
  for (int n = 0; n < kN; ++n) acc[n] = 0.f;
  int64_t c = lane;
  for (; c + 32 * (kUnroll - 1) < pieces; c += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(w + c + 32 * u);  // read once: streamed
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int n = 0; n < kN; ++n) acc[n] += Dot8<T>(wv[u], __ldg(x[n] + c + 32 * u));
    }
  }
  for (; c < pieces; c += 32) {
    const uint4 wv = __ldcs(w + c);
#pragma unroll
    for (int n = 0; n < kN; ++n) acc[n] += Dot8<T>(wv, __ldg(x[n] + c));
  }
#pragma unroll
  for (int n = 0; n < kN; ++n) {
    const float s = WarpSum(acc[n]);
    if (lane == 0) static_cast<OutT*>(p.out)[n * p.out_stride + row] = FromF32<OutT>(s);
  }
}

template <typename T, typename OutT>
void Launch(const GemvParams& p, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((p.m + kWarps - 1) / kWarps);
  static_assert(kMaxGemvRows == 2, "one instantiation a row count");
  if (p.n == 1) {
    GemvKernel<T, OutT, 1><<<blocks, kWarps * 32, 0, stream>>>(p);
  } else {
    GemvKernel<T, OutT, 2><<<blocks, kWarps * 32, 0, stream>>>(p);
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
