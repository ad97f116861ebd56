// GGUF reader: tensor sizes, value accessors, file mapping, typed getters and fp32
// conversion. The byte-level decoder (GgufFile::Parse) lives in gguf_parse.cc.
#include "model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/quant/dequantize.h"

namespace pagoda::gguf {
namespace {

// This abseil build keeps its own string_view type; convert at the boundary.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

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
  // ggml's type names by number (ggml.h); "" marks numbers ggml retired or never used.
  static constexpr std::string_view kNames[] = {
      "F32",     "F16",   "Q4_0",   "Q4_1",  "",      "",       "Q5_0", "Q5_1",    "Q8_0",
      "Q8_1",    "Q2_K",  "Q3_K",   "Q4_K",  "Q5_K",  "Q6_K",   "Q8_K", "IQ2_XXS", "IQ2_XS",
      "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",   "I16",     "I32",
      "I64",     "F64",   "IQ1_M",  "BF16",  "",      "",       "",     "TQ1_0",   "TQ2_0",
      "",        "",      "",       "MXFP4", "NVFP4", "Q1_0",   "Q2_0"};
  const auto t = static_cast<uint32_t>(type);
  if (t >= std::size(kNames) || kNames[t].empty()) return "?";
  return kNames[t];
}

bool IsSupportedTensorType(uint32_t type) {
  switch (static_cast<TensorType>(type)) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ8_0:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kBF16:
      return true;
  }
  return false;
}

kernels::DType ToDType(TensorType type) {
  using kernels::DType;
  switch (type) {
    case TensorType::kF32:
      return DType::kF32;
    case TensorType::kF16:
      return DType::kF16;
    case TensorType::kQ4_0:
      return DType::kQ4_0;
    case TensorType::kQ4_1:
      return DType::kQ4_1;
    case TensorType::kQ5_0:
      return DType::kQ5_0;
    case TensorType::kQ5_1:
      return DType::kQ5_1;
    case TensorType::kQ8_0:
      return DType::kQ8_0;
    case TensorType::kQ2_K:
      return DType::kQ2_K;
    case TensorType::kQ3_K:
      return DType::kQ3_K;
    case TensorType::kQ4_K:
      return DType::kQ4_K;
    case TensorType::kQ5_K:
      return DType::kQ5_K;
    case TensorType::kQ6_K:
      return DType::kQ6_K;
    case TensorType::kBF16:
      return DType::kBF16;
  }
  return DType::kF32;
}

absl::StatusOr<TensorType> FromDType(kernels::DType dtype) {
  for (uint32_t t = 0; t <= static_cast<uint32_t>(TensorType::kBF16); ++t) {
    if (IsSupportedTensorType(t) && ToDType(static_cast<TensorType>(t)) == dtype) {
      return static_cast<TensorType>(t);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("gguf: ", std::string(kernels::DTypeName(dtype)), " is not a GGUF weight type"));
}

absl::StatusOr<uint64_t> TensorBytes(TensorType type, uint64_t n) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  if (!IsSupportedTensorType(static_cast<uint32_t>(type))) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: unknown tensor type ", static_cast<uint32_t>(type)));
  }
  const kernels::DType dtype = ToDType(type);
  const auto unit_elements = static_cast<uint64_t>(kernels::DTypeBlockElems(dtype));
  const uint64_t unit_bytes = kernels::DTypeBlockBytes(dtype);
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
  if (tensor.dims[0] % static_cast<uint64_t>(kernels::DTypeBlockElems(ToDType(tensor.type))) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", tensor.name, "' has rows of ",
                                                   tensor.dims[0], " elements, not whole ",
                                                   Sv(TensorTypeName(tensor.type)), " blocks"));
  }
  // Row by row, so a row never straddles a block whatever the dims.
  const auto row = static_cast<int64_t>(tensor.dims[0]);
  const size_t row_bytes = kernels::DTypeRowBytes(ToDType(tensor.type), row);
  for (uint64_t r = 0; r < *n / tensor.dims[0]; ++r) {
    kernels::quant::DequantizeRow(ToDType(tensor.type), tensor.data + r * row_bytes,
                                  out.data() + r * row, row);
  }
  return absl::OkStatus();
}

}  // namespace pagoda::gguf
