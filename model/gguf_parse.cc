// GgufFile::Parse: the bounds-checked decoder of a GGUF v2/v3 image.
//
// Layout (every integer little-endian; string = u64 length, then the bytes):
//   "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count     x { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | u64 dims[n_dims] | u32 ggml_type | u64 offset }
//   zero padding up to data_start, the next multiple of general.alignment (default 32)
//   data section: tensor t occupies [data_start + offset_t, data_start + offset_t + nbytes_t)
// An array value is u32 item_type | u64 count | count items (items may be arrays).
//
// Every read goes through Cursor, which checks the bytes are there before copying them
// out with memcpy (the image has no alignment guarantees). Counts are checked against the
// remaining bytes before anything is reserved, so a hostile count cannot allocate more
// than a small multiple of the file size.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "model/gguf.h"

namespace pagoda::gguf {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader copies little-endian integers as they are");

constexpr uint64_t kDefaultAlignment = 32;
// The specification's limits: keys at most 2^16 - 1 bytes, tensor names at most 64.
constexpr uint64_t kMaxKeyBytes = 65535;
constexpr uint64_t kMaxTensorNameBytes = 64;
// Smallest encodings, used to reject counts that cannot fit in the remaining bytes:
// a pair is an empty key (8) + value type (4) + a 1-byte value; a tensor info is an empty
// name (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

// This abseil build keeps its own string_view type; convert at the boundary.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Invalid(absl::string_view context, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("gguf: ", context, ": ", message));
}

// The message of an error from gguf.cc's helpers, without its "gguf: " (re-added by the
// caller along with the context).
absl::string_view WithoutPrefix(const absl::Status& s) {
  return absl::StripPrefix(s.message(), "gguf: ");
}

// A key or name for an error message: C-escaped, and cut after 64 bytes so a corrupt
// length cannot make the message as large as the file.
std::string Printable(absl::string_view s) {
  constexpr size_t kMaxShown = 64;
  if (s.size() <= kMaxShown) return absl::CHexEscape(s);
  return absl::StrCat(absl::CHexEscape(s.substr(0, kMaxShown)), "...");
}

class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }

  // Copies a T from the current position; `what` names the field in the error.
  template <typename T>
  absl::Status Read(T* out, absl::string_view what) {
    if (sizeof(T) > remaining()) return Truncated(sizeof(T), what);
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(std::string* out, absl::string_view what) {
    uint64_t len = 0;
    RETURN_IF_ERROR(Read(&len, what));
    if (len > remaining()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " length ", len, " at byte ", pos_ - 8,
                                                     " runs past the end of the file (",
                                                     remaining(), " bytes left)"));
    }
    if (len > 0) out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

 private:
  absl::Status Truncated(uint64_t need, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("truncated: ", what, " at byte ", pos_,
                                                   " needs ", need, " bytes but the file ends at ",
                                                   size_));
  }

  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

bool IsKnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kFloat64); }

uint64_t MinEncodedSize(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kString:  // the length alone
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kArray:  // item type + count
      return 12;
  }
  return 1;
}

template <typename T>
absl::Status ReadUnsigned(Cursor& c, Value* out) {
  T v{};
  RETURN_IF_ERROR(c.Read(&v, "value"));
  out->u = v;
  return absl::OkStatus();
}

template <typename T>
absl::Status ReadSigned(Cursor& c, Value* out) {
  T v{};
  RETURN_IF_ERROR(c.Read(&v, "value"));
  out->i = v;
  return absl::OkStatus();
}

template <typename T>
absl::Status ReadFloat(Cursor& c, Value* out) {
  T v{};
  RETURN_IF_ERROR(c.Read(&v, "value"));
  out->f = static_cast<double>(v);
  return absl::OkStatus();
}

absl::Status ReadValue(Cursor& c, ValueType type, int depth, uint64_t* budget, Value* out);

// Reads an array value after its type tag: item type, count, items. `depth` counts the
// arrays enclosing this one; `budget` is the number of values still allowed.
absl::Status ReadArray(Cursor& c, int depth, uint64_t* budget, Value* out) {
  uint32_t raw_type = 0;
  RETURN_IF_ERROR(c.Read(&raw_type, "array item type"));
  if (!IsKnownValueType(raw_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown array item type ", raw_type, " at byte ", c.pos() - 4));
  }
  const auto item_type = static_cast<ValueType>(raw_type);
  if (item_type == ValueType::kArray && depth + 1 >= kMaxArrayDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("arrays nested more than ", kMaxArrayDepth, " deep at byte ", c.pos() - 4));
  }
  uint64_t count = 0;
  RETURN_IF_ERROR(c.Read(&count, "array count"));
  const uint64_t min_size = MinEncodedSize(item_type);
  if (count > c.remaining() / min_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "array count ", count, " at byte ", c.pos() - 8, " cannot fit: items need at least ",
        min_size, " bytes each and ", c.remaining(), " bytes are left"));
  }
  if (count > *budget) {
    return absl::InvalidArgumentError(absl::StrCat("array count ", count, " at byte ", c.pos() - 8,
                                                   " exceeds the limit of ", kMaxMetadataValues,
                                                   " metadata values"));
  }
  *budget -= count;
  out->array_type = item_type;
  out->array.resize(count);
  for (uint64_t k = 0; k < count; ++k) {
    absl::Status s = ReadValue(c, item_type, depth + 1, budget, &out->array[k]);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("item ", k, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadValue(Cursor& c, ValueType type, int depth, uint64_t* budget, Value* out) {
  out->type = type;
  switch (type) {
    case ValueType::kUint8:
      return ReadUnsigned<uint8_t>(c, out);
    case ValueType::kInt8:
      return ReadSigned<int8_t>(c, out);
    case ValueType::kUint16:
      return ReadUnsigned<uint16_t>(c, out);
    case ValueType::kInt16:
      return ReadSigned<int16_t>(c, out);
    case ValueType::kUint32:
      return ReadUnsigned<uint32_t>(c, out);
    case ValueType::kInt32:
      return ReadSigned<int32_t>(c, out);
    case ValueType::kUint64:
      return ReadUnsigned<uint64_t>(c, out);
    case ValueType::kInt64:
      return ReadSigned<int64_t>(c, out);
    case ValueType::kFloat32:
      return ReadFloat<float>(c, out);
    case ValueType::kFloat64:
      return ReadFloat<double>(c, out);
    case ValueType::kBool: {
      uint8_t b = 0;
      RETURN_IF_ERROR(c.Read(&b, "bool value"));
      if (b > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("bool byte ", b, " at byte ", c.pos() - 1, " is neither 0 nor 1"));
      }
      out->u = b;
      return absl::OkStatus();
    }
    case ValueType::kString:
      return c.ReadString(&out->s, "string value");
    case ValueType::kArray:
      return ReadArray(c, depth, budget, out);
  }
  return absl::InternalError("unreachable value type");
}

// Reads magic, version and the two counts.
absl::Status ReadHeader(Cursor& c, uint32_t* version, uint64_t* tensor_count, uint64_t* kv_count) {
  char magic[4];
  if (c.size() < sizeof(magic)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: file of ", c.size(), " bytes is too short for the magic"));
  }
  RETURN_IF_ERROR(c.Read(&magic, "magic"));
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gguf: bad magic \"", absl::CHexEscape({magic, sizeof(magic)}), "\" (expected \"GGUF\")"));
  }
  absl::Status s = c.Read(version, "version");
  if (s.ok() && *version == 1) {
    return absl::InvalidArgumentError("gguf: version 1 is not supported (need 2 or 3)");
  }
  if (s.ok() && *version != 2 && *version != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: unsupported version ", *version, " (need 2 or 3; a big-endian file?)"));
  }
  if (s.ok()) s = c.Read(tensor_count, "tensor count");
  if (s.ok()) s = c.Read(kv_count, "kv count");
  if (!s.ok()) return Invalid("header", s.message());
  if (*tensor_count > kMaxTensors || *tensor_count > c.remaining() / kMinTensorInfoBytes) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: tensor count ", *tensor_count,
                                                   " is absurd for a file of ", c.size(),
                                                   " bytes (limit ", kMaxTensors, ")"));
  }
  if (*kv_count > kMaxMetadataValues || *kv_count > c.remaining() / kMinKvBytes) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: kv count ", *kv_count,
                                                   " is absurd for a file of ", c.size(),
                                                   " bytes (limit ", kMaxMetadataValues, ")"));
  }
  return absl::OkStatus();
}

// Reads kv pair number `index` into `out`, spending `budget`.
absl::Status ReadKv(Cursor& c, uint64_t index, uint64_t* budget,
                    std::pair<std::string, Value>* out) {
  const std::string where = absl::StrCat("kv ", index);
  absl::Status s = c.ReadString(&out->first, "key");
  if (!s.ok()) return Invalid(where, s.message());
  const std::string context = absl::StrCat(where, " '", Printable(out->first), "'");
  if (out->first.size() > kMaxKeyBytes) {
    return Invalid(context, absl::StrCat("key of ", out->first.size(), " bytes is longer than ",
                                         kMaxKeyBytes));
  }
  uint32_t raw_type = 0;
  s = c.Read(&raw_type, "value type");
  if (!s.ok()) return Invalid(context, s.message());
  if (!IsKnownValueType(raw_type)) {
    return Invalid(context,
                   absl::StrCat("unknown value type ", raw_type, " at byte ", c.pos() - 4));
  }
  s = ReadValue(c, static_cast<ValueType>(raw_type), 0, budget, &out->second);
  if (!s.ok()) return Invalid(context, s.message());
  return absl::OkStatus();
}

// general.alignment when present: a uint32 that is a nonzero power of two.
absl::StatusOr<uint64_t> AlignmentOf(const Value* v) {
  if (v == nullptr) return kDefaultAlignment;
  if (v->type != ValueType::kUint32) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: general.alignment has value type ",
                                                   static_cast<uint32_t>(v->type),
                                                   ", not uint32 (4)"));
  }
  if (!std::has_single_bit(v->u)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: general.alignment ", v->u, " is not a nonzero power of two"));
  }
  return v->u;
}

// Reads tensor info number `index` (without data placement) and validates its shape, type
// and offset alignment.
absl::Status ReadTensorInfo(Cursor& c, uint64_t index, uint64_t alignment, TensorInfo* t) {
  std::string context = absl::StrCat("tensor ", index);
  absl::Status s = c.ReadString(&t->name, "tensor name");
  if (!s.ok()) return Invalid(context, s.message());
  absl::StrAppend(&context, " '", Printable(t->name), "'");
  if (t->name.size() > kMaxTensorNameBytes) {
    return Invalid(context, absl::StrCat("name of ", t->name.size(), " bytes is longer than ",
                                         kMaxTensorNameBytes));
  }
  uint32_t n_dims = 0;
  s = c.Read(&n_dims, "n_dims");
  if (!s.ok()) return Invalid(context, s.message());
  if (n_dims == 0 || n_dims > kMaxDims) {
    return Invalid(context, absl::StrCat("n_dims ", n_dims, " at byte ", c.pos() - 4,
                                         " is not in 1..", kMaxDims));
  }
  t->dims.resize(n_dims);
  for (uint32_t d = 0; d < n_dims && s.ok(); ++d) s = c.Read(&t->dims[d], "dim");
  if (!s.ok()) return Invalid(context, s.message());
  absl::StatusOr<uint64_t> n = ElementCount(t->dims);
  if (!n.ok()) {
    return Invalid(context, absl::StrCat("bad shape [", absl::StrJoin(t->dims, ", "),
                                         "]: ", WithoutPrefix(n.status())));
  }
  uint32_t raw_type = 0;
  s = c.Read(&raw_type, "tensor type");
  if (!s.ok()) return Invalid(context, s.message());
  if (!IsSupportedTensorType(raw_type)) {
    const std::string_view name = TensorTypeName(static_cast<TensorType>(raw_type));
    if (name != "?") {
      return absl::InvalidArgumentError(absl::StrCat("gguf: tensor ", t->name, " has type ",
                                                     Sv(name), ", which pagoda does not support"));
    }
    return Invalid(context, absl::StrCat("unknown tensor type ", raw_type, " at byte ", c.pos() - 4,
                                         " (accepted: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, ",
                                         "Q8_0, Q2_K..Q6_K)"));
  }
  t->type = static_cast<TensorType>(raw_type);
  const auto block = static_cast<uint64_t>(kernels::DTypeBlockElems(ToDType(t->type)));
  if (t->dims[0] % block != 0) {
    return Invalid(context, absl::StrCat(Sv(TensorTypeName(t->type)), " row length ", t->dims[0],
                                         " is not a multiple of ", block));
  }
  absl::StatusOr<uint64_t> bytes = TensorBytes(t->type, *n);
  if (!bytes.ok()) return Invalid(context, WithoutPrefix(bytes.status()));
  t->nbytes = *bytes;
  s = c.Read(&t->offset, "tensor offset");
  if (!s.ok()) return Invalid(context, s.message());
  if (t->offset % alignment != 0) {
    return Invalid(context, absl::StrCat("offset ", t->offset,
                                         " is not a multiple of the "
                                         "alignment ",
                                         alignment));
  }
  return absl::OkStatus();
}

// Points every tensor at its bytes, checking they lie inside the image and that no two
// tensors share bytes.
absl::Status PlaceTensors(const uint8_t* data, uint64_t size, uint64_t data_start,
                          std::vector<TensorInfo>* tensors) {
  for (TensorInfo& t : *tensors) {
    // data_start may exceed size when the padding itself is cut off.
    const uint64_t avail = data_start <= size ? size - data_start : 0;
    if (t.offset > avail || t.nbytes > avail - t.offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: tensor '", Printable(t.name), "' data at offset ", t.offset, " (+",
                       t.nbytes, " bytes) from the data section at byte ", data_start,
                       " is past end of file (size ", size, ")"));
    }
    t.data = data + data_start + t.offset;
  }
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors->size());
  for (const TensorInfo& t : *tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const TensorInfo& a = *by_offset[k - 1];
    const TensorInfo& b = *by_offset[k];
    if (a.offset + a.nbytes > b.offset) {  // no overflow: both end inside the file
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: tensors '", Printable(a.name), "' [", a.offset, ", ",
                       a.offset + a.nbytes, ") and '", Printable(b.name), "' [", b.offset, ", ",
                       b.offset + b.nbytes, ") overlap in the data section"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GgufFile::Parse(const uint8_t* data, uint64_t size) {
  Cursor c(data, size);
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
  RETURN_IF_ERROR(ReadHeader(c, &version_, &tensor_count, &kv_count));

  uint64_t budget = kMaxMetadataValues - kv_count;
  metadata_.resize(kv_count);  // bounded by ReadHeader's checks
  for (uint64_t k = 0; k < kv_count; ++k) {
    RETURN_IF_ERROR(ReadKv(c, k, &budget, &metadata_[k]));
    if (!metadata_index_.emplace(metadata_[k].first, k).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: duplicate metadata key '", Printable(metadata_[k].first), "' (kv ",
                       metadata_index_[metadata_[k].first], " and ", k, ")"));
    }
  }
  ASSIGN_OR_RETURN(alignment_, AlignmentOf(Find("general.alignment")));

  // Re-check against what is left now that the metadata has been consumed.
  if (tensor_count > c.remaining() / kMinTensorInfoBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: tensor count ", tensor_count, " cannot fit in the ", c.remaining(),
                     " bytes after the metadata (at byte ", c.pos(), ")"));
  }
  tensors_.resize(tensor_count);
  for (uint64_t k = 0; k < tensor_count; ++k) {
    RETURN_IF_ERROR(ReadTensorInfo(c, k, alignment_, &tensors_[k]));
    if (!tensor_index_.emplace(tensors_[k].name, k).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: duplicate tensor name '", Printable(tensors_[k].name), "' (tensors ",
                       tensor_index_[tensors_[k].name], " and ", k, ")"));
    }
  }
  // The data section starts at the first multiple of the alignment at or after the end of
  // the tensor infos. pos <= size < 2^63 and alignment <= 2^31, so this cannot overflow.
  const uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  return PlaceTensors(data, size, data_start, &tensors_);
}

}  // namespace pagoda::gguf
