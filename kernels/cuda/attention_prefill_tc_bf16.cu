// Instantiations of the tensor-core prefill kernel for bf16.
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_prefill_tc.cuh"

namespace pagoda::kernels::cuda {

cudaError_t LaunchPrefillTcBf16(const PagedAttentionParams& p, cudaStream_t stream) {
  switch (p.head_dim) {
    case 64:
      return LaunchPrefillTc<__nv_bfloat16, 64>(p, stream);
    case 128:
      return LaunchPrefillTc<__nv_bfloat16, 128>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace pagoda::kernels::cuda
