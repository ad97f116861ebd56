// Element types, device buffers and 2-D tensor views shared by every backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace pagoda::kernels {

enum class DType : uint8_t { kF32, kF16, kBF16 };

// Bytes per element.
size_t DTypeSize(DType dtype);
// "f32", "f16" or "bf16".
std::string_view DTypeName(DType dtype);

// Memory owned by a backend (host memory for the CPU backend, device memory for CUDA),
// released through the deleter the backend supplied. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(void* data, size_t bytes, std::function<void(void*)> deleter);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void Release();
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::function<void(void*)> deleter_;
};

// A row-major 2-D view of backend memory: element (r, c) lives at
// data + (r * stride + c) * DTypeSize(dtype). Views never own memory.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t stride = 0;  // elements from one row to the next (== cols when contiguous)

  // A contiguous [rows, cols] view at `data`.
  static Tensor Make(void* data, DType dtype, int64_t rows, int64_t cols);
  // Rows [begin, begin + count) of this view.
  Tensor Rows(int64_t begin, int64_t count) const;
  // Columns [begin, begin + count) of this view (the stride is kept).
  Tensor Cols(int64_t begin, int64_t count) const;
  // The same memory seen as [rows', cols'] (contiguous views only).
  Tensor Reshape(int64_t new_rows, int64_t new_cols) const;
  bool contiguous() const { return stride == cols; }
  int64_t numel() const { return rows * cols; }
  // Typed pointer to row r (host-addressable backends only).
  template <typename T>
  T* row(int64_t r) const {
    return static_cast<T*>(data) + r * stride;
  }
};

// A tensor together with the buffer that owns its memory.
struct OwnedTensor {
  DeviceBuffer buffer;
  Tensor view;
};

}  // namespace pagoda::kernels
