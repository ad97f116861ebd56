// Matrix-vector products for decode steps of one or two sequences: out[n, m] = x[n, k] . w[m, k]
// for n <= kMaxGemvRows, 16-bit x and w, fp32 accumulation, each weight row read once with
// 16-byte loads by one warp. On an H200 (1B model, bf16) it beats cuBLAS at one row and ties
// at two; at three and four rows cuBLAS's tiles win (each lane here reloads every x row per
// weight piece), so those stay with cuBLAS (docs/GPU.md, "Decode kernels").
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

constexpr int64_t kMaxGemvRows = 2;

struct GemvParams {
  const void* x = nullptr;  // [n, x_stride] of dtype
  const void* w = nullptr;  // [m, w_stride] of dtype
  void* out = nullptr;      // [n, out_stride] of out_dtype (dtype or f32)
  DType dtype = DType::kBF16;
  DType out_dtype = DType::kBF16;
  int64_t n = 0;
  int64_t m = 0;
  int64_t k = 0;
  int64_t x_stride = 0;
  int64_t w_stride = 0;
  int64_t out_stride = 0;
};

// Whether LaunchGemv takes `p`: 1 <= n <= kMaxGemvRows, bf16 or f16 inputs, out of the input
// type or f32, k and the input strides multiples of 8 and x / w 16-byte aligned.
bool GemvApplies(const GemvParams& p);

// Queues the product on `stream` (GemvApplies(p) must hold); returns the launch error.
cudaError_t LaunchGemv(const GemvParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
