// Row gather with element-type conversion: out[r] = convert(in[indices[r]]). Serves the
// embedding lookup, the gather of the rows that need logits, and dtype conversion (identity
// indices) for weight upload and ReadF32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

struct GatherRowsParams {
  const void* in = nullptr;          // [*, in_stride] of in_dtype
  void* out = nullptr;               // [rows, out_stride] of out_dtype
  const int32_t* indices = nullptr;  // [rows] source row of each output row; null = row r
  DType in_dtype = DType::kF32;
  DType out_dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t in_stride = 0;
  int64_t out_stride = 0;
};

// Queues the op on `stream`; returns the launch error, if any. Indices must be valid rows.
cudaError_t LaunchGatherRows(const GatherRowsParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
