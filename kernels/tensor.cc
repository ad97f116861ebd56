#include "kernels/tensor.h"

#include <utility>

namespace pagoda::kernels {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
  }
  return "?";
}

DeviceBuffer::DeviceBuffer(void* data, size_t bytes, std::function<void(void*)> deleter)
    : data_(data), bytes_(bytes), deleter_(std::move(deleter)) {}

DeviceBuffer::~DeviceBuffer() { Release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      deleter_(std::move(other.deleter_)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    deleter_ = std::move(other.deleter_);
  }
  return *this;
}

void DeviceBuffer::Release() {
  if (data_ != nullptr && deleter_) deleter_(data_);
  data_ = nullptr;
  bytes_ = 0;
}

Tensor Tensor::Make(void* data, DType dtype, int64_t rows, int64_t cols) {
  return Tensor{data, dtype, rows, cols, cols};
}

Tensor Tensor::Rows(int64_t begin, int64_t count) const {
  Tensor t = *this;
  t.data = static_cast<char*>(data) + begin * stride * static_cast<int64_t>(DTypeSize(dtype));
  t.rows = count;
  return t;
}

Tensor Tensor::Cols(int64_t begin, int64_t count) const {
  Tensor t = *this;
  t.data = static_cast<char*>(data) + begin * static_cast<int64_t>(DTypeSize(dtype));
  t.cols = count;
  return t;
}

Tensor Tensor::Reshape(int64_t new_rows, int64_t new_cols) const {
  return Tensor{data, dtype, new_rows, new_cols, new_cols};
}

}  // namespace pagoda::kernels
