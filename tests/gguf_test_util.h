// Builders and helpers shared by the GGUF tests: hand-made (often malformed) images, value
// constructors and canonical descriptions, the stories260K bytes.
#pragma once

#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "tests/test_util.h"

namespace pagoda::gguf::test {

inline constexpr uint64_t kStoriesDataStart = 14176;  // header + metadata + infos + padding

inline std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::string s = pagoda::testing::ReadFileOrDie(path);
  return std::vector<uint8_t>(s.begin(), s.end());
}

inline std::vector<uint8_t> StoriesBytes() {
  return ReadBytes(pagoda::testing::ModelPath("stories260K.gguf"));
}

// Little-endian byte builder for hand-made (often malformed) images.
struct Raw {
  std::vector<uint8_t> bytes;

  template <typename T>
  Raw& Put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return *this;
  }
  Raw& U8(uint8_t v) { return Put(v); }
  Raw& U32(uint32_t v) { return Put(v); }
  Raw& U64(uint64_t v) { return Put(v); }
  Raw& Str(std::string_view s) {
    U64(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  Raw& Header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    bytes.insert(bytes.end(), {'G', 'G', 'U', 'F'});
    return U32(version).U64(tensors).U64(kvs);
  }
  Raw& Info(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
            uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) U64(d);
    return U32(type).U64(offset);
  }
  Raw& Zeros(size_t n) {
    bytes.resize(bytes.size() + n, 0);
    return *this;
  }
  Raw& PadTo(size_t alignment) { return Zeros((alignment - bytes.size() % alignment) % alignment); }
};

// One tensor, no metadata: header, info, padding, then `data_bytes` of data.
inline std::vector<uint8_t> OneTensor(const std::vector<uint64_t>& dims, uint32_t type,
                                      uint64_t offset, size_t data_bytes) {
  return Raw().Header(1, 0).Info("w", dims, type, offset).PadTo(32).Zeros(data_bytes).bytes;
}

// The message of the error FromBytes gives (checking it is InvalidArgument), or "<ok>".
inline std::string ErrorOf(std::vector<uint8_t> bytes) {
  auto r = GgufFile::FromBytes(std::move(bytes));
  if (r.ok()) return "<ok>";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  return std::string(r.status().message());
}

inline Value Scalar(ValueType type, uint64_t u, int64_t i = 0, double f = 0) {
  Value v;
  v.type = type;
  v.u = u;
  v.i = i;
  v.f = f;
  return v;
}
inline Value Int(ValueType type, int64_t i) { return Scalar(type, 0, i); }
inline Value Float(ValueType type, double f) { return Scalar(type, 0, 0, f); }
inline Value Str(std::string s) {
  Value v = Scalar(ValueType::kString, 0);
  v.s = std::move(s);
  return v;
}
inline Value Array(ValueType item_type, std::vector<Value> items) {
  Value v = Scalar(ValueType::kArray, 0);
  v.array_type = item_type;
  v.array = std::move(items);
  return v;
}

// Canonical text of a value: the fields its type uses, floats as exact bit patterns.
inline std::string Describe(const Value& v) {
  switch (v.type) {
    case ValueType::kInt8:
    case ValueType::kInt16:
    case ValueType::kInt32:
    case ValueType::kInt64:
      return absl::StrCat("i", static_cast<int>(v.type), ":", v.i);
    case ValueType::kFloat32:
    case ValueType::kFloat64:
      return absl::StrCat("f", static_cast<int>(v.type), ":", std::bit_cast<uint64_t>(v.f));
    case ValueType::kString:
      return absl::StrCat("s:", v.s.size(), ":", v.s);
    case ValueType::kArray: {
      std::string out = absl::StrCat("a", static_cast<int>(v.array_type), "[");
      for (const Value& item : v.array) absl::StrAppend(&out, Describe(item), ",");
      return out + "]";
    }
    default:
      return absl::StrCat("u", static_cast<int>(v.type), ":", v.u);
  }
}

using Kv = std::pair<std::string, Value>;

// One key per value type (all 13), nested arrays included.
inline std::vector<Kv> AllTypesMetadata() {
  using VT = ValueType;
  const double f32 = static_cast<double>(0.1f);
  return {
      {"u8", Scalar(VT::kUint8, 255)},
      {"i8", Int(VT::kInt8, -128)},
      {"u16", Scalar(VT::kUint16, 65535)},
      {"i16", Int(VT::kInt16, -32768)},
      {"u32", Scalar(VT::kUint32, 4294967295u)},
      {"i32", Int(VT::kInt32, std::numeric_limits<int32_t>::min())},
      {"f32", Float(VT::kFloat32, f32)},
      {"bool", Scalar(VT::kBool, 1)},
      {"str", Str(std::string("h\xc3\xa9llo\0x", 8))},
      {"u64", Scalar(VT::kUint64, std::numeric_limits<uint64_t>::max())},
      {"i64", Int(VT::kInt64, std::numeric_limits<int64_t>::min())},
      {"f64", Float(VT::kFloat64, 0.1)},
      {"a.u8",
       Array(VT::kUint8, {Scalar(VT::kUint8, 0), Scalar(VT::kUint8, 1), Scalar(VT::kUint8, 255)})},
      {"a.bool", Array(VT::kBool, {Scalar(VT::kBool, 0), Scalar(VT::kBool, 1)})},
      {"a.str", Array(VT::kString, {Str("<s>"), Str(""), Str("\n")})},
      {"a.f64", Array(VT::kFloat64, {Float(VT::kFloat64, -2.5), Float(VT::kFloat64, 1e300)})},
      {"a.u64", Array(VT::kUint64, {Scalar(VT::kUint64, 7), Scalar(VT::kUint64, 1ull << 63)})},
      {"a.empty", Array(VT::kFloat32, {})},
      {"a.nested", Array(VT::kArray, {Array(VT::kInt16, {Int(VT::kInt16, -1), Int(VT::kInt16, 2)}),
                                      Array(VT::kString, {Str("x")}), Array(VT::kInt8, {})})},
  };
}

inline std::vector<uint8_t> AllTypesImage() {
  GgufWriter w;
  for (const auto& [key, value] : AllTypesMetadata()) w.AddValue(key, value);
  w.AddUint32("t.u32", 7);
  w.AddInt32("t.i32", -7);
  w.AddUint64("t.u64", 1ull << 40);
  w.AddFloat32("t.f32", 1.5f);
  w.AddBool("t.bool", false);
  w.AddString("t.str", "llama");
  w.AddStringArray("t.strs", {"<unk>", "<s>"});
  w.AddFloat32Array("t.floats", {0.5f, -1.0f});
  w.AddInt32Array("t.ints", {-3, 4});
  w.AddTensor("t", {2}, TensorType::kF32, std::vector<uint8_t>(8, 0));
  return w.Serialize();
}

inline std::vector<uint8_t> U16Bytes(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> out(v.size() * 2);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

inline std::vector<float> Dequantize(const TensorInfo& t) {
  std::vector<float> out(t.num_elements());
  absl::Status s = DequantizeToF32(t, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

inline void ExpectSameFloats(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(want[k]))
        << "element " << k << ": " << got[k] << " vs " << want[k];
  }
}

}  // namespace pagoda::gguf::test
