#include "kernels/tensor.h"

#include <utility>

namespace pagoda::kernels {

namespace {

struct TypeInfo {
  std::string_view name;
  int64_t block_elems;
  size_t block_bytes;
};

// Indexed by DType. Block sizes follow ggml-common.h (QK_K = 256).
constexpr TypeInfo kTypes[] = {
    {"f32", 1, 4},      {"f16", 1, 2},          {"bf16", 1, 2},       {"q4_0", 32, 18},
    {"q4_1", 32, 20},   {"q5_0", 32, 22},       {"q5_1", 32, 24},     {"q8_0", 32, 34},
    {"q8_1", 32, 36},   {"q2_k", 256, 84},      {"q3_k", 256, 110},   {"q4_k", 256, 144},
    {"q5_k", 256, 176}, {"q6_k", 256, 210},     {"q8_k", 256, 292},   {"int8", 1, 1},
    {"fp8", 1, 1},      {"q4_k_x16", 256, 148}, {"q8_0_x16", 32, 34}, {"q6_k_x16", 256, 274},
};

const TypeInfo& Info(DType dtype) { return kTypes[static_cast<size_t>(dtype)]; }

}  // namespace

size_t DTypeSize(DType dtype) { return IsBlockType(dtype) ? 0 : Info(dtype).block_bytes; }

int64_t DTypeBlockElems(DType dtype) { return Info(dtype).block_elems; }

size_t DTypeBlockBytes(DType dtype) { return Info(dtype).block_bytes; }

bool IsBlockType(DType dtype) { return Info(dtype).block_elems > 1; }

size_t DTypeRowBytes(DType dtype, int64_t elems) {
  const TypeInfo& t = Info(dtype);
  return static_cast<size_t>(elems / t.block_elems) * t.block_bytes;
}

std::string_view DTypeName(DType dtype) { return Info(dtype).name; }

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
  t.data = static_cast<char*>(data) + DTypeRowBytes(dtype, begin * stride);
  t.rows = count;
  return t;
}

Tensor Tensor::Cols(int64_t begin, int64_t count) const {
  Tensor t = *this;
  t.data = static_cast<char*>(data) + DTypeRowBytes(dtype, begin);
  t.cols = count;
  return t;
}

Tensor Tensor::Reshape(int64_t new_rows, int64_t new_cols) const {
  return Tensor{data, dtype, new_rows, new_cols, new_cols};
}

}  // namespace pagoda::kernels
