#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/paged_attention.cuh"

namespace pagoda::kernels::cuda {

cudaError_t LaunchPagedAttention(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) return cudaErrorInvalidValue;
  const bool fp8 = p.kv_dtype == DType::kF8E4M3;
  if (p.path == AttentionPath::kTensorCore && p.kv_dtype != p.dtype && !fp8) {
    return cudaErrorInvalidValue;
  }
  cudaError_t err = cudaErrorInvalidValue;
  if (p.path == AttentionPath::kGeneric) {
    err = LaunchGenericAttention(p, stream);
  } else if (fp8) {
    err = LaunchDecodeTcFp8(p, stream);
    if (err == cudaSuccess) err = LaunchPrefillTcFp8(p, stream);
  } else if (p.dtype == DType::kBF16) {
    err = LaunchDecodeTcBf16(p, stream);
    if (err == cudaSuccess) err = LaunchPrefillTcBf16(p, stream);
  } else if (p.dtype == DType::kF16) {
    err = LaunchDecodeTcF16(p, stream);
    if (err == cudaSuccess) err = LaunchPrefillTcF16(p, stream);
  }
  if (err != cudaSuccess) return err;
  return LaunchSplitReduce(p, stream);
}

}  // namespace pagoda::kernels::cuda
