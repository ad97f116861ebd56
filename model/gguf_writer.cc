// GGUF writer. The layout it produces (see gguf_parse.cc for the format):
//   header | kv pairs | tensor infos | pad | data_0 | pad | data_1 | pad | ...
// where every pad runs to the next multiple of the alignment, so tensor t's offset (from
// the data section start) is the sum of the padded sizes of tensors 0..t-1.
#include "model/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda::gguf {
namespace {

constexpr uint64_t kDefaultAlignment = 32;

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

void PutString(std::vector<uint8_t>* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

void PutArrayHeader(std::vector<uint8_t>* out, ValueType item_type, uint64_t count) {
  Put<uint32_t>(out, static_cast<uint32_t>(item_type));
  Put<uint64_t>(out, count);
}

// Encodes the payload of `v` as `type` (no type tag).
void PutPayload(std::vector<uint8_t>* out, ValueType type, const Value& v) {
  switch (type) {
    case ValueType::kUint8:
      return Put(out, static_cast<uint8_t>(v.u));
    case ValueType::kInt8:
      return Put(out, static_cast<int8_t>(v.i));
    case ValueType::kUint16:
      return Put(out, static_cast<uint16_t>(v.u));
    case ValueType::kInt16:
      return Put(out, static_cast<int16_t>(v.i));
    case ValueType::kUint32:
      return Put(out, static_cast<uint32_t>(v.u));
    case ValueType::kInt32:
      return Put(out, static_cast<int32_t>(v.i));
    case ValueType::kUint64:
      return Put(out, v.u);
    case ValueType::kInt64:
      return Put(out, v.i);
    case ValueType::kFloat32:
      return Put(out, static_cast<float>(v.f));
    case ValueType::kFloat64:
      return Put(out, v.f);
    case ValueType::kBool:
      return Put(out, static_cast<uint8_t>(v.u != 0 ? 1 : 0));
    case ValueType::kString:
      return PutString(out, v.s);
    case ValueType::kArray:
      PutArrayHeader(out, v.array_type, v.array.size());
      for (const Value& item : v.array) PutPayload(out, v.array_type, item);
      return;
  }
  // An out-of-range type (a test crafting a bad file) has no payload.
}

uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  if (alignment == 0) return n;
  return (n + alignment - 1) / alignment * alignment;
}

// Hands `n` zero bytes to `sink` in bounded chunks (the alignment may be large).
absl::Status PutZeros(const std::function<absl::Status(const uint8_t*, size_t)>& sink, uint64_t n) {
  static constexpr uint8_t kZeros[4096] = {};
  while (n > 0) {
    const size_t chunk = n < sizeof(kZeros) ? static_cast<size_t>(n) : sizeof(kZeros);
    RETURN_IF_ERROR(sink(kZeros, chunk));
    n -= chunk;
  }
  return absl::OkStatus();
}

// write(2) until all of [p, p + n) is out, retrying on EINTR and short writes.
absl::Status WriteAll(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("gguf: writing ", path));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

GgufWriter::GgufWriter(uint32_t version, uint64_t alignment)
    : version_(version), alignment_(alignment) {
  if (alignment != kDefaultAlignment) {
    AddUint32("general.alignment", static_cast<uint32_t>(alignment));
  }
}

void GgufWriter::AddUint32(std::string_view key, uint32_t v) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kUint32));
  Put(&kv_bytes_, v);
  ++kv_count_;
}

void GgufWriter::AddInt32(std::string_view key, int32_t v) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kInt32));
  Put(&kv_bytes_, v);
  ++kv_count_;
}

void GgufWriter::AddUint64(std::string_view key, uint64_t v) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kUint64));
  Put(&kv_bytes_, v);
  ++kv_count_;
}

void GgufWriter::AddFloat32(std::string_view key, float v) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kFloat32));
  Put(&kv_bytes_, v);
  ++kv_count_;
}

void GgufWriter::AddBool(std::string_view key, bool v) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kBool));
  Put<uint8_t>(&kv_bytes_, v ? 1 : 0);
  ++kv_count_;
}

void GgufWriter::AddString(std::string_view key, std::string_view v) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kString));
  PutString(&kv_bytes_, v);
  ++kv_count_;
}

void GgufWriter::AddStringArray(std::string_view key, const std::vector<std::string>& v) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kArray));
  PutArrayHeader(&kv_bytes_, ValueType::kString, v.size());
  for (const std::string& s : v) PutString(&kv_bytes_, s);
  ++kv_count_;
}

void GgufWriter::AddFloat32Array(std::string_view key, const std::vector<float>& v) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kArray));
  PutArrayHeader(&kv_bytes_, ValueType::kFloat32, v.size());
  for (float x : v) Put(&kv_bytes_, x);
  ++kv_count_;
}

void GgufWriter::AddInt32Array(std::string_view key, const std::vector<int32_t>& v) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kArray));
  PutArrayHeader(&kv_bytes_, ValueType::kInt32, v.size());
  for (int32_t x : v) Put(&kv_bytes_, x);
  ++kv_count_;
}

void GgufWriter::AddValue(std::string_view key, const Value& v) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(v.type));
  PutPayload(&kv_bytes_, v.type, v);
  ++kv_count_;
}

void GgufWriter::AddTensor(std::string_view name, std::vector<uint64_t> dims, TensorType type,
                           std::vector<uint8_t> data) {
  tensors_.push_back(PendingTensor{std::string(name), std::move(dims), type, std::move(data)});
}

absl::Status GgufWriter::Emit(
    const std::function<absl::Status(const uint8_t*, size_t)>& sink) const {
  std::vector<uint8_t> head;
  head.reserve(24 + kv_bytes_.size() + tensors_.size() * 64);
  head.insert(head.end(), {'G', 'G', 'U', 'F'});
  Put<uint32_t>(&head, version_);
  Put<uint64_t>(&head, tensors_.size());
  Put<uint64_t>(&head, kv_count_);
  head.insert(head.end(), kv_bytes_.begin(), kv_bytes_.end());
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    PutString(&head, t.name);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) Put<uint64_t>(&head, d);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&head, offset);
    offset = AlignUp(offset + t.data.size(), alignment_);
  }
  RETURN_IF_ERROR(sink(head.data(), head.size()));
  RETURN_IF_ERROR(PutZeros(sink, AlignUp(head.size(), alignment_) - head.size()));
  for (const PendingTensor& t : tensors_) {
    if (!t.data.empty()) RETURN_IF_ERROR(sink(t.data.data(), t.data.size()));
    RETURN_IF_ERROR(PutZeros(sink, AlignUp(t.data.size(), alignment_) - t.data.size()));
  }
  return absl::OkStatus();
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out;
  absl::Status s = Emit([&out](const uint8_t* p, size_t n) {
    out.insert(out.end(), p, p + n);
    return absl::OkStatus();
  });
  (void)s;  // the in-memory sink cannot fail
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("gguf: cannot create ", path));
  absl::Status s =
      Emit([fd, &path](const uint8_t* p, size_t n) { return WriteAll(fd, p, n, path); });
  if (::close(fd) != 0 && s.ok()) {
    s = absl::ErrnoToStatus(errno, absl::StrCat("gguf: closing ", path));
  }
  return s;
}

}  // namespace pagoda::gguf
