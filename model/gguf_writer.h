// Builds GGUF v3 images: used by make-model and by tests that craft (malformed) files.
// The writer encodes exactly what it is given and validates nothing (tensor data sizes,
// types, duplicate keys), so tests can write files the reader must reject.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "model/gguf.h"

namespace pagoda::gguf {

class GgufWriter {
 public:
  // Writes general.alignment (as uint32, first key) only when alignment != 32. Tensor
  // data is padded to a multiple of `alignment` (no padding when it is 0).
  explicit GgufWriter(uint32_t version = 3, uint64_t alignment = 32);

  void AddUint32(std::string_view key, uint32_t v);
  void AddInt32(std::string_view key, int32_t v);
  void AddUint64(std::string_view key, uint64_t v);
  void AddFloat32(std::string_view key, float v);
  void AddBool(std::string_view key, bool v);
  void AddString(std::string_view key, std::string_view v);
  void AddStringArray(std::string_view key, const std::vector<std::string>& v);
  void AddFloat32Array(std::string_view key, const std::vector<float>& v);
  void AddInt32Array(std::string_view key, const std::vector<int32_t>& v);
  // Adds any value (every scalar type, nested arrays). Each field is encoded as its type
  // says: u for unsigned and bool, i for signed, f for floats, s for strings; array items
  // are encoded as v.array_type whatever their own `type`.
  void AddValue(std::string_view key, const Value& v);
  // Adds a tensor; `data` holds its encoded bytes (TensorBytes(type, elements)).
  void AddTensor(std::string_view name, std::vector<uint64_t> dims, TensorType type,
                 std::vector<uint8_t> data);

  // The whole file image.
  std::vector<uint8_t> Serialize() const;
  // Writes the image to `path`, streaming each tensor's bytes (no whole-image copy); an
  // I/O failure gives the errno-derived status, and a partial file may remain.
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<uint64_t> dims;
    TensorType type;
    std::vector<uint8_t> data;
  };
  // Hands the image to `sink` piece by piece: header, metadata and tensor infos with the
  // padding before the data section, then each tensor's data and its padding.
  absl::Status Emit(const std::function<absl::Status(const uint8_t*, size_t)>& sink) const;

  uint32_t version_;
  uint64_t alignment_;
  uint64_t kv_count_ = 0;
  std::vector<uint8_t> kv_bytes_;  // serialized key/value pairs
  std::vector<PendingTensor> tensors_;
};

}  // namespace pagoda::gguf
