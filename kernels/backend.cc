#include "kernels/backend.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/quant/dequantize.h"
#ifdef PAGODA_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace pagoda::kernels {

absl::StatusOr<OwnedTensor> Backend::AllocateTensor(DType dtype, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) return absl::InvalidArgumentError("negative tensor shape");
  if (cols % DTypeBlockElems(dtype) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a row of ", cols, " elements is not a whole ",
                                                   "number of ", std::string(DTypeName(dtype)),
                                                   " blocks"));
  }
  const size_t bytes = DTypeRowBytes(dtype, rows * cols);
  OwnedTensor t;
  ASSIGN_OR_RETURN(t.buffer, Allocate(bytes == 0 ? DTypeBlockBytes(dtype) : bytes));
  t.view = Tensor::Make(t.buffer.data(), dtype, rows, cols);
  return t;
}

absl::StatusOr<DeviceBuffer> Backend::AllocateHost(size_t bytes) {
  void* p = std::malloc(std::max<size_t>(bytes, 1));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes of host memory"));
  }
  return DeviceBuffer(p, bytes, [](void* q) { std::free(q); });
}

absl::Status Backend::CopyHostAsync(void* dst, const void* src, size_t bytes, bool to_host) {
  return to_host ? CopyToHost(dst, src, bytes) : CopyToDevice(dst, src, bytes);
}

absl::Status Backend::CopyHostBatchAsync(absl::Span<const HostCopy> copies, bool to_host) {
  for (const HostCopy& c : copies) RETURN_IF_ERROR(CopyHostAsync(c.dst, c.src, c.bytes, to_host));
  return absl::OkStatus();
}

absl::StatusOr<OwnedTensor> Backend::CreateWeightRaw(DType type, const void* data, int64_t rows,
                                                     int64_t cols) {
  RETURN_IF_ERROR(ValidateWeightShape(type, rows, cols));
  std::vector<float> host(static_cast<size_t>(rows * cols));
  const size_t row_bytes = DTypeRowBytes(type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    quant::DequantizeRow(type, static_cast<const char*>(data) + r * row_bytes,
                         host.data() + r * cols, cols);
  }
  return CreateWeight(host.data(), rows, cols);
}

absl::Status ValidateWeightShape(DType type, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) return absl::InvalidArgumentError("negative weight shape");
  if (type == DType::kQ8_1 || type == DType::kQ8_K) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(DTypeName(type)), " is an activation format, not a weight type"));
  }
  if (cols % DTypeBlockElems(type) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("weight rows of ", cols, " elements are not a ",
                                                   "whole number of ", std::string(DTypeName(type)),
                                                   " blocks"));
  }
  return absl::OkStatus();
}

bool CudaBuiltIn() {
#ifdef PAGODA_HAVE_CUDA
  return true;
#else
  return false;
#endif
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
