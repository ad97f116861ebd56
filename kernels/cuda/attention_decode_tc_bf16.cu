// Instantiations of the tensor-core decode kernel for bf16.
#include "kernels/cuda/attention_decode_tc.cuh"
#include "kernels/cuda/attention_kernels.h"

namespace pagoda::kernels::cuda {

cudaError_t LaunchDecodeTcBf16(const PagedAttentionParams& p, cudaStream_t stream) {
  switch (p.head_dim) {
    case 64:
      return LaunchDecodeTc<__nv_bfloat16, 64>(p, stream);
    case 128:
      return LaunchDecodeTc<__nv_bfloat16, 128>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace pagoda::kernels::cuda
