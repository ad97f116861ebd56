// Instantiations of the tensor-core decode kernel over an fp8 e4m3 cache, for bf16 and f16
// activations.
#include "kernels/cuda/attention_decode_tc.cuh"
#include "kernels/cuda/attention_kernels.h"

namespace pagoda::kernels::cuda {

cudaError_t LaunchDecodeTcFp8(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.kv_dtype != DType::kF8E4M3) return cudaErrorInvalidValue;
  const bool bf16 = p.dtype == DType::kBF16;
  if (!bf16 && p.dtype != DType::kF16) return cudaErrorInvalidValue;
  switch (p.head_dim) {
    case 64:
      return bf16 ? LaunchDecodeTc<__nv_bfloat16, 64, true>(p, stream)
                  : LaunchDecodeTc<__half, 64, true>(p, stream);
    case 128:
      return bf16 ? LaunchDecodeTc<__nv_bfloat16, 128, true>(p, stream)
                  : LaunchDecodeTc<__half, 128, true>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace pagoda::kernels::cuda
