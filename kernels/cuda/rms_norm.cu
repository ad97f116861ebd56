#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/rms_norm.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row: a block-wide sum of squares, then a scaled copy.
template <typename T>
__global__ void __launch_bounds__(kThreads) RmsNormKernel(const RmsNormParams p) {
  __shared__ float scratch[32];
  const T* x = static_cast<const T*>(p.x) + static_cast<int64_t>(blockIdx.x) * p.x_stride;
  const T* w = static_cast<const T*>(p.weight);
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(blockIdx.x) * p.out_stride;
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < p.cols; c += kThreads) {
    const float v = ToF32(x[c]);
    sum += v * v;
  }
  sum = BlockSum(sum, scratch);
  const float scale = 1.f / sqrtf(sum / static_cast<float>(p.cols) + p.eps);
  // Each thread rereads only the elements it read above, so out may alias x.
  for (int64_t c = threadIdx.x; c < p.cols; c += kThreads) {
    out[c] = FromF32<T>(ToF32(x[c]) * scale * ToF32(w[c]));
  }
}

// Elements of T in one 16-byte load, and the 16-byte pieces a thread of the vector kernel
// keeps in registers (so a row of up to kThreads * kMaxPieces * kVec elements is read once).
template <typename T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));
constexpr int kMaxPieces = 4;

// The same for rows whose pointers and strides are 16-byte aligned and whose length is a
// multiple of kVec: every load and store is 16 bytes and each thread issues its loads
// together (the loop above waits for one load after another: for a single decode row most of
// its time).
template <typename T>
__global__ void __launch_bounds__(kThreads) RmsNormVecKernel(const RmsNormParams p) {
  constexpr int kN = kVec<T>;
  __shared__ float scratch[32];
  const auto* x = reinterpret_cast<const uint4*>(static_cast<const T*>(p.x) +
                                                 static_cast<int64_t>(blockIdx.x) * p.x_stride);
  const auto* w = static_cast<const uint4*>(p.weight);
  auto* out = reinterpret_cast<uint4*>(static_cast<T*>(p.out) +
                                       static_cast<int64_t>(blockIdx.x) * p.out_stride);
  const int pieces = static_cast<int>(p.cols / kN);
  uint4 v[kMaxPieces];
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPieces; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < pieces) v[i] = x[c];
  }
#pragma unroll
  for (int i = 0; i < kMaxPieces; ++i) {
    if (threadIdx.x + i * kThreads < pieces) {
      const T* e = reinterpret_cast<const T*>(&v[i]);
#pragma unroll
      for (int j = 0; j < kN; ++j) sum += ToF32(e[j]) * ToF32(e[j]);
    }
  }
  sum = BlockSum(sum, scratch);
  const float scale = 1.f / sqrtf(sum / static_cast<float>(p.cols) + p.eps);
#pragma unroll
  for (int i = 0; i < kMaxPieces; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < pieces) {
      const uint4 wv = w[c];
      const T* e = reinterpret_cast<const T*>(&v[i]);
      const T* we = reinterpret_cast<const T*>(&wv);
      uint4 o;
      T* oe = reinterpret_cast<T*>(&o);
#pragma unroll
      for (int j = 0; j < kN; ++j) oe[j] = FromF32<T>(ToF32(e[j]) * scale * ToF32(we[j]));
      out[c] = o;
    }
  }
}

bool Aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

cudaError_t LaunchRmsNorm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  const bool ok = DispatchDType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kN = kVec<T>;
    const bool vec = p.cols % kN == 0 && p.cols / kN <= int64_t{kThreads} * kMaxPieces &&
                     p.x_stride % kN == 0 && p.out_stride % kN == 0 && Aligned16(p.x) &&
                     Aligned16(p.out) && Aligned16(p.weight);
    if (vec) {
      RmsNormVecKernel<T><<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
    } else {
      RmsNormKernel<T><<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
    }
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace pagoda::kernels::cuda
