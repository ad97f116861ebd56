// Launchers of the individual paged-attention kernels, each defined in its own .cu file so
// that nvcc builds the template instantiations in parallel. LaunchPagedAttention
// (paged_attention.cu) picks among them.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/paged_attention.cuh"

namespace pagoda::kernels::cuda {

// CUDA-core kernel over all plan items, any dtype, head_dim <= 256 (attention_generic.cu).
cudaError_t LaunchGenericAttention(const PagedAttentionParams& p, cudaStream_t stream);
// Tensor-core decode over the plan items, head_dim 64 or 128 (attention_decode_tc_*.cu).
cudaError_t LaunchDecodeTcBf16(const PagedAttentionParams& p, cudaStream_t stream);
cudaError_t LaunchDecodeTcF16(const PagedAttentionParams& p, cudaStream_t stream);
// As above over an fp8 e4m3 cache, bf16 or f16 activations (attention_decode_tc_fp8.cu).
cudaError_t LaunchDecodeTcFp8(const PagedAttentionParams& p, cudaStream_t stream);
// Tensor-core prefill over the plan tiles, head_dim 64 or 128 (attention_prefill_tc_*.cu).
cudaError_t LaunchPrefillTcBf16(const PagedAttentionParams& p, cudaStream_t stream);
cudaError_t LaunchPrefillTcF16(const PagedAttentionParams& p, cudaStream_t stream);
cudaError_t LaunchPrefillTcFp8(const PagedAttentionParams& p, cudaStream_t stream);
// Merges the partial rows of split tokens into `out` (attention_reduce.cu).
cudaError_t LaunchSplitReduce(const PagedAttentionParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
