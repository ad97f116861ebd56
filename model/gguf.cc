// GGUF reader: tensor sizes, value accessors, file mapping, typed getters and fp32
// conversion. The byte-level decoder (GgufFile::Parse) lives in gguf_parse.cc.
#include "model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda::gguf {
namespace {

// This abseil build keeps its own string_view type; convert at the boundary.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr uint64_t kQ8_0BlockElements = 32;
constexpr uint64_t kQ8_0BlockBytes = 34;  // fp16 scale d, then 32 int8 quants

absl::string_view ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
      return "uint8";
    case ValueType::kInt8:
      return "int8";
    case ValueType::kUint16:
      return "uint16";
    case ValueType::kInt16:
      return "int16";
    case ValueType::kUint32:
      return "uint32";
    case ValueType::kInt32:
      return "int32";
    case ValueType::kFloat32:
      return "float32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kUint64:
      return "uint64";
    case ValueType::kInt64:
      return "int64";
    case ValueType::kFloat64:
      return "float64";
  }
  return "?";
}

// IEEE binary16 -> binary32. Layout: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa
// bits. Exact for every input: subnormals are renormalized, inf stays inf, and NaN keeps
// its sign and payload (shifted into the top of the fp32 mantissa).
float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf or NaN
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: mant * 2^-24. Shift the leading one up to bit 10 (the implicit bit),
    // lowering the exponent once per shift; fp32 represents the result as a normal number.
    int32_t e = 1 - 15;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e + 127) << 23) | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// bfloat16 is the top half of a binary32, so widening is a shift (exact for all inputs).
float Bf16ToFp32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

absl::Status KeyNotFound(std::string_view key) {
  return absl::NotFoundError(absl::StrCat("gguf: key '", Sv(key), "' not found"));
}

absl::Status WrongType(std::string_view key, const Value& v, std::string_view wanted) {
  std::string have(ValueTypeName(v.type));
  if (v.type == ValueType::kArray) absl::StrAppend(&have, " of ", ValueTypeName(v.array_type));
  return absl::InvalidArgumentError(
      absl::StrCat("gguf: key '", Sv(key), "' is ", have, ", not ", Sv(wanted)));
}

bool IsIntegerType(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}

// The integer in `v` (any integer type or bool), with errors naming `what`.
absl::StatusOr<int64_t> ToInt(const Value& v, std::string_view key, std::string_view what) {
  int64_t out;
  if (v.AsInt64(&out)) return out;
  if (v.type == ValueType::kUint64) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: key '", Sv(key), "'", Sv(what), " value ",
                                                   v.u, " does not fit in int64"));
  }
  return WrongType(key, v, "an integer");
}

}  // namespace

std::string_view TensorTypeName(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return "F32";
    case TensorType::kF16:
      return "F16";
    case TensorType::kQ8_0:
      return "Q8_0";
    case TensorType::kBF16:
      return "BF16";
  }
  return "?";
}

absl::StatusOr<uint64_t> TensorBytes(TensorType type, uint64_t n) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t unit_elements = 1;
  uint64_t unit_bytes;
  switch (type) {
    case TensorType::kF32:
      unit_bytes = 4;
      break;
    case TensorType::kF16:
    case TensorType::kBF16:
      unit_bytes = 2;
      break;
    case TensorType::kQ8_0:
      unit_elements = kQ8_0BlockElements;
      unit_bytes = kQ8_0BlockBytes;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: unknown tensor type ", static_cast<uint32_t>(type)));
  }
  if (n % unit_elements != 0) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: ", n, " elements of ",
                                                   Sv(TensorTypeName(type)), " are not a whole ",
                                                   "number of ", unit_elements, "-element blocks"));
  }
  const uint64_t units = n / unit_elements;
  if (units > kMax / unit_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: byte size of ", n, " elements of ",
                                                   Sv(TensorTypeName(type)), " overflows"));
  }
  return units * unit_bytes;
}

absl::StatusOr<uint64_t> ElementCount(absl::Span<const uint64_t> dims) {
  if (dims.empty() || dims.size() > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: ", dims.size(), " dims (must be 1..", kMaxDims, ")"));
  }
  uint64_t n = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: dim ", d, " is zero"));
    }
    if (n > std::numeric_limits<uint64_t>::max() / dims[d]) {
      return absl::InvalidArgumentError("gguf: element count overflows uint64");
    }
    n *= dims[d];
  }
  return n;
}

bool Value::AsInt64(int64_t* out) const {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kUint16:
    case ValueType::kUint32:
    case ValueType::kBool:
      *out = static_cast<int64_t>(u);
      return true;
    case ValueType::kUint64:
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      *out = static_cast<int64_t>(u);
      return true;
    case ValueType::kInt8:
    case ValueType::kInt16:
    case ValueType::kInt32:
    case ValueType::kInt64:
      *out = i;
      return true;
    default:
      return false;
  }
}

bool Value::AsDouble(double* out) const {
  switch (type) {
    case ValueType::kFloat32:
    case ValueType::kFloat64:
      *out = f;
      return true;
    case ValueType::kUint8:
    case ValueType::kUint16:
    case ValueType::kUint32:
    case ValueType::kUint64:
      *out = static_cast<double>(u);
      return true;
    case ValueType::kInt8:
    case ValueType::kInt16:
    case ValueType::kInt32:
    case ValueType::kInt64:
      *out = static_cast<double>(i);
      return true;
    default:
      return false;
  }
}

uint64_t TensorInfo::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("gguf: cannot open ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("gguf: cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("gguf: ", path, " is not a regular file"));
  }
  auto file = std::unique_ptr<GgufFile>(new GgufFile());
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > 0) {  // mmap rejects a zero length; Parse reports the empty file instead
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("gguf: cannot mmap ", path));
    }
    file->mapping_ = p;
    file->mapping_size_ = size;
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  absl::Status s = file->Parse(static_cast<const uint8_t*>(file->mapping_), size);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " [", path, "]"));
  }
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(std::vector<uint8_t> bytes) {
  auto file = std::unique_ptr<GgufFile>(new GgufFile());
  file->owned_ = std::move(bytes);
  RETURN_IF_ERROR(file->Parse(file->owned_.data(), file->owned_.size()));
  return file;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_size_);
}

const Value* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(Sv(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(Sv(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(key);
  return ToInt(*v, key, "");
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(key);
  double out;
  if (!v->AsDouble(&out)) return WrongType(key, *v, "a number");
  return out;
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(key);
  if (v->type != ValueType::kBool) return WrongType(key, *v, "bool");
  return v->u != 0;
}

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(key);
  if (v->type != ValueType::kString) return WrongType(key, *v, "string");
  return v->s;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(key);
  if (v->type != ValueType::kArray || v->array_type != ValueType::kString) {
    return WrongType(key, *v, "array of string");
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const Value& item : v->array) out.push_back(item.s);
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(key);
  if (v->type != ValueType::kArray ||
      (v->array_type != ValueType::kFloat32 && v->array_type != ValueType::kFloat64)) {
    return WrongType(key, *v, "array of float");
  }
  std::vector<float> out;
  out.reserve(v->array.size());
  for (const Value& item : v->array) out.push_back(static_cast<float>(item.f));
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(key);
  if (v->type != ValueType::kArray ||
      !(IsIntegerType(v->array_type) || v->array_type == ValueType::kBool)) {
    return WrongType(key, *v, "array of integer");
  }
  std::vector<int64_t> out;
  out.reserve(v->array.size());
  for (size_t k = 0; k < v->array.size(); ++k) {
    ASSIGN_OR_RETURN(int64_t x, ToInt(v->array[k], key, absl::StrCat(" item ", k)));
    out.push_back(x);
  }
  return out;
}

absl::StatusOr<int64_t> GgufFile::GetIntOr(std::string_view key, int64_t fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetInt(key);
}

absl::StatusOr<double> GgufFile::GetFloatOr(std::string_view key, double fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetFloat(key);
}

absl::StatusOr<bool> GgufFile::GetBoolOr(std::string_view key, bool fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetBool(key);
}

absl::Status DequantizeToF32(const TensorInfo& tensor, absl::Span<float> out) {
  absl::StatusOr<uint64_t> n = ElementCount(tensor.dims);
  if (!n.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(n.status().message(), " (tensor '", tensor.name, "')"));
  }
  if (out.size() != *n) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", tensor.name, "' has ", *n,
                                                   " elements but the output holds ", out.size(),
                                                   " floats"));
  }
  ASSIGN_OR_RETURN(const uint64_t bytes, TensorBytes(tensor.type, *n));
  if (tensor.nbytes < bytes || tensor.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", tensor.name, "' needs ", bytes,
                                                   " bytes of ", Sv(TensorTypeName(tensor.type)),
                                                   " but has ", tensor.nbytes));
  }
  const uint8_t* src = tensor.data;
  switch (tensor.type) {
    case TensorType::kF32:
      std::memcpy(out.data(), src, bytes);
      break;
    case TensorType::kF16:
      for (uint64_t k = 0; k < *n; ++k) out[k] = Fp16ToFp32(LoadU16(src + 2 * k));
      break;
    case TensorType::kBF16:
      for (uint64_t k = 0; k < *n; ++k) out[k] = Bf16ToFp32(LoadU16(src + 2 * k));
      break;
    case TensorType::kQ8_0:
      // Block b covers elements [32b, 32b + 32): bytes [34b, 34b + 2) hold the fp16 scale
      // d, bytes [34b + 2, 34b + 34) the int8 quants q; element = d * q.
      for (uint64_t b = 0; b < *n / kQ8_0BlockElements; ++b) {
        const uint8_t* block = src + b * kQ8_0BlockBytes;
        const float d = Fp16ToFp32(LoadU16(block));
        float* dst = out.data() + b * kQ8_0BlockElements;
        for (uint64_t k = 0; k < kQ8_0BlockElements; ++k) {
          dst[k] = d * static_cast<float>(static_cast<int8_t>(block[2 + k]));
        }
      }
      break;
  }
  return absl::OkStatus();
}

}  // namespace pagoda::gguf
