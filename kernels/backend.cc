#include "kernels/backend.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/cpu_backend.h"
#ifdef PAGODA_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace pagoda::kernels {

absl::StatusOr<OwnedTensor> Backend::AllocateTensor(DType dtype, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) return absl::InvalidArgumentError("negative tensor shape");
  const size_t bytes = static_cast<size_t>(rows * cols) * DTypeSize(dtype);
  OwnedTensor t;
  ASSIGN_OR_RETURN(t.buffer, Allocate(bytes == 0 ? DTypeSize(dtype) : bytes));
  t.view = Tensor::Make(t.buffer.data(), dtype, rows, cols);
  return t;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  switch (options.device) {
    case DeviceKind::kCpu:
      return CreateCpuBackend(options);
    case DeviceKind::kCuda:
#ifdef PAGODA_HAVE_CUDA
      return CreateCudaBackend(options);
#else
      return absl::UnavailableError("pagoda was built without CUDA (PAGODA_CUDA=OFF)");
#endif
    case DeviceKind::kAuto:
#ifdef PAGODA_HAVE_CUDA
      if (CudaDeviceAvailable().ok()) return CreateCudaBackend(options);
#endif
      return CreateCpuBackend(options);
  }
  return absl::InvalidArgumentError("unknown device kind");
}

}  // namespace pagoda::kernels
