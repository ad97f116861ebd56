#include "kernels/cuda/cuda_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pagoda::kernels::cuda {

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg = absl::StrCat("cuda: ", what, ": ", cudaGetErrorString(err));
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so later calls do not see it
    return absl::ResourceExhaustedError(msg);
  }
  return absl::InternalError(msg);
}

ScratchBuffer::~ScratchBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

absl::Status ScratchBuffer::Reserve(size_t bytes, cudaStream_t stream) {
  if (bytes <= capacity_) return absl::OkStatus();
  if (absl::Status st = CudaStatus(cudaStreamSynchronize(stream), "scratch sync"); !st.ok()) {
    return st;
  }
  const size_t grown = std::max(bytes, capacity_ * 3 / 2);
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
  capacity_ = 0;
  if (absl::Status st = CudaStatus(cudaMalloc(&data_, grown), "scratch alloc"); !st.ok()) {
    data_ = nullptr;
    return st;
  }
  capacity_ = grown;
  return absl::OkStatus();
}

UploadBuffer::~UploadBuffer() {
  if (copied_ != nullptr) {
    cudaEventSynchronize(copied_);
    cudaEventDestroy(copied_);
  }
  if (host_ != nullptr) cudaFreeHost(host_);
  if (device_ != nullptr) cudaFree(device_);
}

absl::Status UploadBuffer::Reserve(size_t bytes, cudaStream_t stream) {
  if (copied_ == nullptr) {
    if (absl::Status st =
            CudaStatus(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming), "event create");
        !st.ok()) {
      copied_ = nullptr;
      return st;
    }
  }
  if (absl::Status st = CudaStatus(cudaEventSynchronize(copied_), "upload wait"); !st.ok()) {
    return st;
  }
  if (bytes <= capacity_) return absl::OkStatus();
  if (absl::Status st = CudaStatus(cudaStreamSynchronize(stream), "upload sync"); !st.ok()) {
    return st;
  }
  const size_t grown = std::max({bytes, capacity_ * 3 / 2, size_t{4096}});
  if (host_ != nullptr) cudaFreeHost(host_);
  if (device_ != nullptr) cudaFree(device_);
  host_ = nullptr;
  device_ = nullptr;
  capacity_ = 0;
  if (absl::Status st =
          CudaStatus(cudaMallocHost(reinterpret_cast<void**>(&host_), grown), "pinned alloc");
      !st.ok()) {
    host_ = nullptr;
    return st;
  }
  if (absl::Status st =
          CudaStatus(cudaMalloc(reinterpret_cast<void**>(&device_), grown), "arena alloc");
      !st.ok()) {
    device_ = nullptr;
    return st;
  }
  capacity_ = grown;
  return absl::OkStatus();
}

absl::Status UploadBuffer::Upload(size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status st = CudaStatus(
          cudaMemcpyAsync(device_, host_, bytes, cudaMemcpyHostToDevice, stream), "upload");
      !st.ok()) {
    return st;
  }
  return CudaStatus(cudaEventRecord(copied_, stream), "upload event");
}

}  // namespace pagoda::kernels::cuda
