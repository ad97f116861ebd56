// Instantiations of the tensor-core prefill kernel for f16.
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_prefill_tc.cuh"

namespace pagoda::kernels::cuda {

cudaError_t LaunchPrefillTcF16(const PagedAttentionParams& p, cudaStream_t stream) {
  switch (p.head_dim) {
    case 64:
      return LaunchPrefillTc<__half, 64>(p, stream);
    case 128:
      return LaunchPrefillTc<__half, 128>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace pagoda::kernels::cuda
