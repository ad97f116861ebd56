// Device helpers shared by the CUDA kernels: element conversion between the storage types
// and fp32, and warp/block reductions. Included by .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

// fp32 value of a stored element.
__device__ __forceinline__ float ToF32(float x) { return x; }
__device__ __forceinline__ float ToF32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToF32(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToF32(__nv_fp8_e4m3 x) { return static_cast<float>(x); }

// Stored element nearest to `x` (round to nearest even).
template <typename T>
__device__ __forceinline__ T FromF32(float x);
template <>
__device__ __forceinline__ float FromF32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromF32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half FromF32<__half>(float x) {
  return __float2half_rn(x);
}
// e4m3 nearest to `x`, saturated to +-448 (e4m3 has no infinity).
template <>
__device__ __forceinline__ __nv_fp8_e4m3 FromF32<__nv_fp8_e4m3>(float x) {
  __nv_fp8_e4m3 r;
  r.__x = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  return r;
}

// Element i of an array whose element type is only known at run time.
__device__ __forceinline__ float LoadAny(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16:
      return ToF32(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::kF16:
      return ToF32(static_cast<const __half*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// Stores `v` as element i of an array whose element type is only known at run time.
__device__ __forceinline__ void StoreAny(void* p, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::kBF16:
      static_cast<__nv_bfloat16*>(p)[i] = FromF32<__nv_bfloat16>(v);
      break;
    case DType::kF16:
      static_cast<__half*>(p)[i] = FromF32<__half>(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
      break;
  }
}

// Sum / max over the 32 lanes of a warp; every lane gets the result.
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Sum over the whole thread block (blockDim.x a multiple of 32, at most 1024); every thread
// gets the result. `scratch` is 32 floats of shared memory; the call synchronizes the block.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int num_warps = blockDim.x >> 5;
  v = WarpSum(v);
  __syncthreads();  // `scratch` may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < num_warps ? scratch[lane] : 0.f;
  return WarpSum(v);
}

// Calls fn(T{}) with T the storage type that `dtype` names; false for an unknown dtype.
template <typename Fn>
bool DispatchDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      fn(float{});
      return true;
    case DType::kBF16:
      fn(__nv_bfloat16{});
      return true;
    case DType::kF16:
      fn(__half{});
      return true;
    default:  // ggml block formats: expanded at load, never an activation type
      return false;
  }
}

// Calls fn(C{}) with C the device type of KV cache type `dtype`: the activation types and
// fp8 e4m3. False for the others.
template <typename Fn>
bool DispatchKvDType(DType dtype, Fn&& fn) {
  if (dtype == DType::kF8E4M3) {
    fn(__nv_fp8_e4m3{});
    return true;
  }
  return DispatchDType(dtype, fn);
}

}  // namespace pagoda::kernels::cuda
