// Element types, device buffers and 2-D tensor views shared by every backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace pagoda::kernels {

// Element types. Besides the float types, the ggml block formats a weight may keep
// (numbered apart from ggml; model/ maps GGUF types onto these) and the internal activation
// formats Q8_1 and Q8_K that quantized matrix products quantize activations into.
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_0,
  kQ8_1,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ8_K,
  kI8,       // int8 codes with float parameters beside them (the CPU KV cache's int8 type)
  kF8E4M3,   // fp8 e4m3 (the CUDA KV cache's fp8 type: x ~= value * KvCacheShape::fp8_scale)
  kQ4_Kx16,  // Q4_K rows interleaved in sixteens (the CPU backend's matmul layout,
             // kernels/quant/interleaved.h)
  kQ8_0x16,  // Q8_0 rows interleaved in sixteens (the same)
  kQ6_Kx16,  // Q6_K rows interleaved in sixteens, a byte per quant (the same)
};

// Bytes per element of a float type; 0 for a block type (use DTypeRowBytes).
size_t DTypeSize(DType dtype);
// Elements per block: 1 for float types, 32 or 256 for block types.
int64_t DTypeBlockElems(DType dtype);
// Bytes per block (DTypeSize for float types).
size_t DTypeBlockBytes(DType dtype);
// True for the ggml block formats.
bool IsBlockType(DType dtype);
// Bytes of `elems` consecutive elements; elems must be a multiple of DTypeBlockElems.
size_t DTypeRowBytes(DType dtype, int64_t elems);
// "f32", "f16", "bf16", "q4_0", ..., "q8_k".
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
// data + DTypeRowBytes(dtype, r * stride + c). For a block type, stride and column offsets
// are whole blocks, so row r starts at block (r * stride) / DTypeBlockElems. Views never
// own memory.
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
  // Typed pointer to row r (host-addressable backends only; float types).
  template <typename T>
  T* row(int64_t r) const {
    return static_cast<T*>(data) + r * stride;
  }
  // Address of row r for any type, block types included (host-addressable backends only).
  char* row_bytes(int64_t r) const {
    return static_cast<char*>(data) + DTypeRowBytes(dtype, r * stride);
  }
};

// A tensor together with the buffer that owns its memory.
struct OwnedTensor {
  DeviceBuffer buffer;
  Tensor view;
};

}  // namespace pagoda::kernels
