// GGUF (v2, v3) reader: metadata of every value type and tensor descriptors over an
// mmapped file or an in-memory buffer. Every read is bounds-checked; a malformed file
// gives an error status, never a crash or an out-of-bounds read.
//
// Errors: a malformed image (bad magic, unsupported version, truncation, bad type,
// out-of-bounds or overlapping tensor data, ...) is always InvalidArgument with a message
// that starts with "gguf: " and names the key or tensor and the byte position involved.
// Open() maps I/O failures through errno (NotFound for a missing file, ...). Getters give
// NotFound for a missing key and InvalidArgument for a wrong type or an out-of-range value.
//
// Limits from the specification: keys of at most 65535 bytes, tensor names of at most 64.
// Limits beyond the specification, against memory exhaustion by a hostile file: at most
// kMaxTensors tensors, kMaxMetadataValues metadata values (pairs plus array items, all
// levels), arrays nested at most kMaxArrayDepth deep. Every count is also checked against
// the bytes left in the file (at the minimum encoded size of one item) before any memory
// is reserved for it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/tensor.h"

namespace pagoda::gguf {

// Metadata value types, numbered as in the GGUF specification.
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// Tensor element types this reader accepts (ggml numbering). Other ggml types (IQ*, TQ*,
// MXFP4, ...) are rejected by name; numbers ggml never assigned are "unknown".
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

inline constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
inline constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 22;
inline constexpr int kMaxArrayDepth = 8;
inline constexpr uint32_t kMaxDims = 4;

// Name of a ggml tensor type number ("F32", "Q4_K", "IQ2_XXS", ...), "?" for a number
// ggml never assigned.
std::string_view TensorTypeName(TensorType type);
// True for the types in TensorType (those pagoda reads).
bool IsSupportedTensorType(uint32_t type);
// The kernels element type of a supported tensor type.
kernels::DType ToDType(TensorType type);
// The tensor type of a weight DType (F32, F16, BF16 or a weight block format); Q8_1 and
// Q8_K, which GGUF files never store as weights, give InvalidArgument.
absl::StatusOr<TensorType> FromDType(kernels::DType dtype);
// Bytes taken by `n` elements of `type`; error when n is not a whole number of blocks.
absl::StatusOr<uint64_t> TensorBytes(TensorType type, uint64_t n);
// Product of `dims`; InvalidArgument for 0 or more than kMaxDims dims, a zero dim, or a
// product that overflows uint64.
absl::StatusOr<uint64_t> ElementCount(absl::Span<const uint64_t> dims);

// One metadata value. Scalars live in the matching field; arrays hold their items.
struct Value {
  ValueType type = ValueType::kUint8;
  uint64_t u = 0;  // unsigned integers and bool
  int64_t i = 0;   // signed integers
  double f = 0;    // floats
  std::string s;   // strings
  ValueType array_type = ValueType::kUint8;
  std::vector<Value> array;

  // Integer value of any integer or bool type; false when not an integer or bool, or a
  // uint64 above INT64_MAX.
  bool AsInt64(int64_t* out) const;
  // Float value of a float or integer type; false otherwise (bool, string, array).
  bool AsDouble(double* out) const;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the fastest-varying (row length)
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;            // from the start of the data section
  const uint8_t* data = nullptr;  // points into the file mapping; nbytes valid bytes
  uint64_t nbytes = 0;

  // Product of dims (validated by the parser not to overflow).
  uint64_t num_elements() const;
};

class GgufFile {
 public:
  // Maps (read-only, MAP_PRIVATE) and parses the file at `path`; the mapping lives as
  // long as the GgufFile and TensorInfo::data points into it.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses a GGUF image held in memory (takes ownership).
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBytes(std::vector<uint8_t> bytes);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // The value under `key`, or nullptr.
  const Value* Find(std::string_view key) const;
  // The tensor called `name`, or nullptr.
  const TensorInfo* FindTensor(std::string_view name) const;

  // Typed getters: NotFound when absent, InvalidArgument when of another type/range.
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  // Getters with a default used only when the key is absent (a wrong type is still an error).
  absl::StatusOr<int64_t> GetIntOr(std::string_view key, int64_t fallback) const;
  absl::StatusOr<double> GetFloatOr(std::string_view key, double fallback) const;
  absl::StatusOr<bool> GetBoolOr(std::string_view key, bool fallback) const;

 private:
  GgufFile() = default;
  absl::Status Parse(const uint8_t* data, uint64_t size);

  void* mapping_ = nullptr;  // mmap of the file, or null for FromBytes
  uint64_t mapping_size_ = 0;
  std::vector<uint8_t> owned_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> metadata_;
  absl::flat_hash_map<std::string, size_t> metadata_index_;
  std::vector<TensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

// Converts a tensor's elements to fp32 (every supported type, as ggml dequantizes). InvalidArgument
// when out.size() != the element count, or the tensor is malformed (unknown type, dims, fewer than
// TensorBytes valid bytes).
absl::Status DequantizeToF32(const TensorInfo& tensor, absl::Span<float> out);

}  // namespace pagoda::gguf
