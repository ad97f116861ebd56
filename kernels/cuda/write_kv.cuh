// Scatter of the batch tokens' K and V rows into one layer of the paged cache, converted
// from the activation type to the cache's (fp8 e4m3: divided by the per-tensor scale).
//
// Token i goes to slot s = slot_mapping[i] (s = block * block_size + offset); its K row of
// num_kv_heads * head_dim elements lands at k_plane + s * width, likewise V. s < 0 skips.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

struct WriteKvParams {
  const void* k = nullptr;                // [num_tokens, k_stride] of dtype
  const void* v = nullptr;                // [num_tokens, v_stride] of dtype
  void* k_plane = nullptr;                // [num_blocks, block_size, num_kv_heads, head_dim]
  void* v_plane = nullptr;                // [num_blocks, block_size, num_kv_heads, head_dim]
  const int32_t* slot_mapping = nullptr;  // [num_tokens]; negative = skip the token
  DType dtype = DType::kF32;              // of k and v
  DType kv_dtype = DType::kF32;           // of the planes: an activation type or kF8E4M3
  float inv_scale = 1.f;                  // kF8E4M3: 1 / KvCacheShape::fp8_scale
  int64_t num_tokens = 0;
  int64_t width = 0;  // num_kv_heads * head_dim
  int64_t k_stride = 0;
  int64_t v_stride = 0;
};

// Queues the op on `stream`; returns the launch error, if any (cudaErrorInvalidValue for a
// type pair it lacks). Slots must be in the cache.
cudaError_t LaunchWriteKv(const WriteKvParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
