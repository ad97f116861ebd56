// Fuzzes the GGUF reader on in-memory images: parse, then walk every metadata value through
// every typed getter, touch every tensor's bytes, dequantize small tensors, and build a
// tokenizer from the metadata. The reader's contract: any image gives either a file or an
// InvalidArgument "gguf: ..." error, never a crash or an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_data.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace {

using pagoda::fuzz::Check;
namespace gguf = pagoda::gguf;

// Reads every field of `v` and its items, so ASan sees any bad string or array.
uint64_t Walk(const gguf::Value& v) {
  uint64_t h = v.u ^ static_cast<uint64_t>(v.i) ^ static_cast<uint64_t>(v.type);
  int64_t i = 0;
  double d = 0;
  if (v.AsInt64(&i)) h += static_cast<uint64_t>(i);
  if (v.AsDouble(&d)) h += d == d ? 1 : 0;
  for (char c : v.s) h = h * 31 + static_cast<uint8_t>(c);
  for (const gguf::Value& item : v.array) h += Walk(item);
  return h;
}

void WalkGetters(const gguf::GgufFile& file, const std::string& key) {
  Check(file.Find(key) != nullptr, "Find misses a listed key");
  (void)file.GetInt(key);
  (void)file.GetFloat(key);
  (void)file.GetBool(key);
  (void)file.GetString(key);
  (void)file.GetStringArray(key);
  (void)file.GetFloatArray(key);
  (void)file.GetIntArray(key);
  (void)file.GetIntOr(key, 0);
  (void)file.GetFloatOr(key, 0);
  (void)file.GetBoolOr(key, false);
}

void WalkTensor(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  Check(file.FindTensor(t.name) != nullptr, "FindTensor misses a listed tensor");
  Check(gguf::IsSupportedTensorType(static_cast<uint32_t>(t.type)), "unsupported type parsed");
  const uint64_t n = t.num_elements();
  auto bytes = gguf::TensorBytes(t.type, n);
  Check(bytes.ok() && *bytes == t.nbytes, "nbytes differs from TensorBytes");
  (void)gguf::ToDType(t.type);
  (void)gguf::TensorTypeName(t.type);
  if (t.nbytes > 0) {
    volatile uint8_t sink = t.data[0];
    sink = t.data[t.nbytes - 1];
    (void)sink;
  }
  if (n <= (uint64_t{1} << 16)) {
    std::vector<float> out(n);
    Check(gguf::DequantizeToF32(t, absl::MakeSpan(out)).ok(),
          "a parsed tensor fails to dequantize");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gguf::GgufFile::FromBytes(std::vector<uint8_t>(data, data + size));
  if (!file.ok()) {
    Check(absl::IsInvalidArgument(file.status()), "a bad image is not InvalidArgument");
    Check(file.status().message().substr(0, 6) == "gguf: ", "error without the gguf: prefix");
    return 0;
  }
  uint64_t h = 0;
  for (const auto& [key, value] : (*file)->metadata()) {
    h += Walk(value);
    WalkGetters(**file, key);
  }
  for (const gguf::TensorInfo& t : (*file)->tensors()) WalkTensor(**file, t);
  auto tokenizer = pagoda::model::Tokenizer::FromGguf(**file);
  if (tokenizer.ok()) {
    const auto ids = (*tokenizer)->Encode("Hello <s> world\n", true, true);
    for (int32_t id : ids) Check(id >= 0 && id < (*tokenizer)->vocab_size(), "id out of range");
    (void)(*tokenizer)->Decode(ids);
  }
  return h == 42 ? 0 : 0;
}
