// GGUF reader/writer: round trips of every value and tensor type, the real stories260K
// model, one test per kind of malformed file, and truncation / bit-flip sweeps that must
// end in OK or an error, never a crash (run under ASan+UBSan too).
#include "model/gguf.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf_writer.h"
#include "tests/test_util.h"

namespace pagoda::gguf {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kStoriesDataStart = 14176;  // header + metadata + infos + padding

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::string s = pagoda::testing::ReadFileOrDie(path);
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::vector<uint8_t> StoriesBytes() {
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
std::vector<uint8_t> OneTensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                               size_t data_bytes) {
  return Raw().Header(1, 0).Info("w", dims, type, offset).PadTo(32).Zeros(data_bytes).bytes;
}

// The message of the error FromBytes gives (checking it is InvalidArgument), or "<ok>".
std::string ErrorOf(std::vector<uint8_t> bytes) {
  auto r = GgufFile::FromBytes(std::move(bytes));
  if (r.ok()) return "<ok>";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  return std::string(r.status().message());
}

Value Scalar(ValueType type, uint64_t u, int64_t i = 0, double f = 0) {
  Value v;
  v.type = type;
  v.u = u;
  v.i = i;
  v.f = f;
  return v;
}
Value Int(ValueType type, int64_t i) { return Scalar(type, 0, i); }
Value Float(ValueType type, double f) { return Scalar(type, 0, 0, f); }
Value Str(std::string s) {
  Value v = Scalar(ValueType::kString, 0);
  v.s = std::move(s);
  return v;
}
Value Array(ValueType item_type, std::vector<Value> items) {
  Value v = Scalar(ValueType::kArray, 0);
  v.array_type = item_type;
  v.array = std::move(items);
  return v;
}

// Canonical text of a value: the fields its type uses, floats as exact bit patterns.
std::string Describe(const Value& v) {
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
std::vector<Kv> AllTypesMetadata() {
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

std::vector<uint8_t> AllTypesImage() {
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

std::vector<uint8_t> U16Bytes(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> out(v.size() * 2);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<float> Dequantize(const TensorInfo& t) {
  std::vector<float> out(t.num_elements());
  absl::Status s = DequantizeToF32(t, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void ExpectSameFloats(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(want[k]))
        << "element " << k << ": " << got[k] << " vs " << want[k];
  }
}

TEST(GgufRoundTrip, EveryValueType) {
  auto file = GgufFile::FromBytes(AllTypesImage());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.Find("general.alignment"), nullptr);  // only written when != 32
  const std::vector<Kv> want = AllTypesMetadata();
  ASSERT_EQ(f.metadata().size(), want.size() + 9);
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(f.metadata()[k].first, want[k].first);
    EXPECT_EQ(Describe(f.metadata()[k].second), Describe(want[k].second)) << want[k].first;
    ASSERT_NE(f.Find(want[k].first), nullptr);
  }
  EXPECT_EQ(*f.GetInt("u8"), 255);
  EXPECT_EQ(*f.GetInt("i8"), -128);
  EXPECT_EQ(*f.GetInt("u32"), 4294967295);
  EXPECT_EQ(*f.GetInt("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*f.GetInt("bool"), 1);
  EXPECT_EQ(*f.GetInt("t.i32"), -7);
  EXPECT_EQ(*f.GetInt("t.u64"), int64_t{1} << 40);
  EXPECT_EQ(*f.GetFloat("f32"), static_cast<double>(0.1f));
  EXPECT_EQ(*f.GetFloat("f64"), 0.1);
  EXPECT_EQ(*f.GetFloat("i16"), -32768.0);
  EXPECT_EQ(*f.GetFloat("t.f32"), 1.5);
  EXPECT_TRUE(*f.GetBool("bool"));
  EXPECT_FALSE(*f.GetBool("t.bool"));
  EXPECT_EQ(*f.GetString("str"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(*f.GetString("t.str"), "llama");
  EXPECT_EQ(*f.GetStringArray("a.str"), (std::vector<std::string>{"<s>", "", "\n"}));
  EXPECT_EQ(*f.GetStringArray("t.strs"), (std::vector<std::string>{"<unk>", "<s>"}));
  EXPECT_EQ(*f.GetFloatArray("t.floats"), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(*f.GetFloatArray("a.f64"), (std::vector<float>{-2.5f, static_cast<float>(1e300)}));
  EXPECT_TRUE(f.GetFloatArray("a.empty")->empty());
  EXPECT_EQ(*f.GetIntArray("t.ints"), (std::vector<int64_t>{-3, 4}));
  EXPECT_EQ(*f.GetIntArray("a.u8"), (std::vector<int64_t>{0, 1, 255}));
  EXPECT_EQ(*f.GetIntArray("a.bool"), (std::vector<int64_t>{0, 1}));
}

TEST(GgufRoundTrip, GetterErrors) {
  auto file = GgufFile::FromBytes(AllTypesImage());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  auto expect_invalid = [](const absl::Status& s, std::string_view substr) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(substr));
  };
  EXPECT_EQ(f.GetInt("absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(f.GetString("absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(f.GetStringArray("absent").status().code(), absl::StatusCode::kNotFound);
  expect_invalid(f.GetInt("u64").status(),
                 "key 'u64' value 18446744073709551615 does not fit in int64");
  expect_invalid(f.GetInt("f32").status(), "key 'f32' is float32, not an integer");
  expect_invalid(f.GetInt("str").status(), "is string, not an integer");
  expect_invalid(f.GetFloat("str").status(), "is string, not a number");
  expect_invalid(f.GetFloat("bool").status(), "is bool, not a number");
  expect_invalid(f.GetBool("u8").status(), "is uint8, not bool");
  expect_invalid(f.GetString("a.str").status(), "is array of string, not string");
  expect_invalid(f.GetStringArray("a.u8").status(), "is array of uint8, not array of string");
  expect_invalid(f.GetStringArray("str").status(), "is string, not array of string");
  expect_invalid(f.GetFloatArray("t.ints").status(), "is array of int32, not array of float");
  expect_invalid(f.GetIntArray("t.floats").status(), "not array of integer");
  expect_invalid(f.GetIntArray("a.nested").status(), "is array of array, not array of integer");
  expect_invalid(f.GetIntArray("a.u64").status(),
                 "key 'a.u64' item 1 value 9223372036854775808 does not fit in int64");
  EXPECT_EQ(*f.GetIntOr("absent", 7), 7);
  EXPECT_EQ(*f.GetIntOr("i8", 7), -128);
  expect_invalid(f.GetIntOr("str", 7).status(), "not an integer");
  EXPECT_EQ(*f.GetFloatOr("absent", 2.5), 2.5);
  expect_invalid(f.GetFloatOr("str", 2.5).status(), "not a number");
  EXPECT_TRUE(*f.GetBoolOr("absent", true));
  EXPECT_TRUE(*f.GetBoolOr("bool", false));
  expect_invalid(f.GetBoolOr("u8", true).status(), "not bool");
}

TEST(GgufRoundTrip, TensorsOfEachType) {
  const std::vector<float> f32 = {0.0f, -0.0f, 1.5f, std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::denorm_min()};
  std::vector<uint8_t> f32_bytes(f32.size() * 4);
  std::memcpy(f32_bytes.data(), f32.data(), f32_bytes.size());
  // fp16: 1, -2, smallest subnormal, largest subnormal, smallest normal, largest finite,
  // inf, -inf, -0.
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x03FF, 0x0400,
                                     0x7BFF, 0x7C00, 0xFC00, 0x8000};
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> f16_want = {1.0f,
                                       -2.0f,
                                       std::ldexp(1.0f, -24),
                                       1023 * std::ldexp(1.0f, -24),
                                       std::ldexp(1.0f, -14),
                                       65504.0f,
                                       inf,
                                       -inf,
                                       -0.0f};
  // bf16: 1, -3, smallest subnormal (2^-133), inf.
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC040, 0x0001, 0x7F80};
  const std::vector<float> bf16_want = {1.0f, -3.0f, std::ldexp(1.0f, -133), inf};
  // Q8_0: 4 blocks of (fp16 d, 32 x int8 q) with d = 0.5, -0.25, 2, 0.
  const std::vector<uint16_t> scales = {0x3800, 0xB400, 0x4000, 0x0000};
  const std::vector<float> scale_values = {0.5f, -0.25f, 2.0f, 0.0f};
  std::vector<uint8_t> q8;
  std::vector<float> q8_want;
  for (size_t b = 0; b < scales.size(); ++b) {
    q8.push_back(scales[b] & 0xFF);
    q8.push_back(scales[b] >> 8);
    for (int k = 0; k < 32; ++k) {
      const auto q = static_cast<int8_t>((b * 32 + k) * 37 % 256 - 128);
      q8.push_back(static_cast<uint8_t>(q));
      q8_want.push_back(scale_values[b] * q);
    }
  }
  GgufWriter w;
  w.AddTensor("a.f32", {5}, TensorType::kF32, f32_bytes);
  w.AddTensor("b.f16", {3, 3}, TensorType::kF16, U16Bytes(f16));
  w.AddTensor("c.bf16", {2, 1, 2}, TensorType::kBF16, U16Bytes(bf16));
  w.AddTensor("d.q8", {64, 2}, TensorType::kQ8_0, q8);
  auto file = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  const auto& ts = (*file)->tensors();
  ASSERT_EQ(ts.size(), 4u);
  const std::vector<std::vector<uint8_t>> bytes = {f32_bytes, U16Bytes(f16), U16Bytes(bf16), q8};
  const std::vector<uint64_t> offsets = {0, 32, 64, 96};  // 20, 18, 8 bytes padded to 32
  const std::vector<TensorType> types = {TensorType::kF32, TensorType::kF16, TensorType::kBF16,
                                         TensorType::kQ8_0};
  for (size_t k = 0; k < ts.size(); ++k) {
    EXPECT_EQ(ts[k].offset, offsets[k]);
    EXPECT_EQ(ts[k].type, types[k]);
    ASSERT_EQ(ts[k].nbytes, bytes[k].size());
    EXPECT_EQ(std::memcmp(ts[k].data, bytes[k].data(), bytes[k].size()), 0) << ts[k].name;
    EXPECT_EQ((*file)->FindTensor(ts[k].name), &ts[k]);
  }
  EXPECT_EQ(ts[2].dims, (std::vector<uint64_t>{2, 1, 2}));
  EXPECT_EQ(ts[3].num_elements(), 128u);
  EXPECT_EQ((*file)->FindTensor("nope"), nullptr);
  ExpectSameFloats(Dequantize(ts[0]), f32);
  ExpectSameFloats(Dequantize(ts[1]), f16_want);
  ExpectSameFloats(Dequantize(ts[2]), bf16_want);
  ExpectSameFloats(Dequantize(ts[3]), q8_want);
}

// Reference binary16 decoding by arithmetic, independent of the bit manipulation under test.
float ReferenceHalf(uint16_t h, int exp_bits, int mant_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int exp = (h >> mant_bits) & ((1 << exp_bits) - 1);
  const int mant = h & ((1 << mant_bits) - 1);
  const float sign = (h >> 15) ? -1.0f : 1.0f;
  if (exp == (1 << exp_bits) - 1) {
    return mant == 0 ? sign * std::numeric_limits<float>::infinity() : std::nanf("");
  }
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), 1 - bias - mant_bits);
  return sign * std::ldexp(static_cast<float>(mant + (1 << mant_bits)), exp - bias - mant_bits);
}

TEST(GgufDequantize, EveryF16AndBf16BitPattern) {
  std::vector<uint16_t> all(65536);
  for (uint32_t k = 0; k < all.size(); ++k) all[k] = static_cast<uint16_t>(k);
  for (TensorType type : {TensorType::kF16, TensorType::kBF16}) {
    const int exp_bits = type == TensorType::kF16 ? 5 : 8;
    std::vector<uint8_t> bytes = U16Bytes(all);
    TensorInfo t{"t", {256, 256}, type, 0, bytes.data(), bytes.size()};
    const std::vector<float> got = Dequantize(t);
    for (uint32_t k = 0; k < all.size(); ++k) {
      const float want = ReferenceHalf(static_cast<uint16_t>(k), exp_bits, 15 - exp_bits);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[k])) << k;
        EXPECT_EQ(std::signbit(got[k]), (k >> 15) != 0) << k;
      } else {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(want))
            << TensorTypeName(type) << " pattern " << k;
      }
    }
  }
}

TEST(GgufDequantize, Errors) {
  std::vector<uint8_t> bytes(16, 0);
  TensorInfo t{"w", {4}, TensorType::kF32, 0, bytes.data(), bytes.size()};
  std::vector<float> out(3);
  absl::Status s = DequantizeToF32(t, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'w' has 4 elements but the output "
                                                  "holds 3 floats"));
  out.resize(4);
  t.nbytes = 15;
  EXPECT_THAT(std::string(DequantizeToF32(t, absl::MakeSpan(out)).message()),
              HasSubstr("needs 16 bytes of F32 but has 15"));
  t.type = static_cast<TensorType>(2);
  t.nbytes = 16;
  EXPECT_THAT(std::string(DequantizeToF32(t, absl::MakeSpan(out)).message()),
              HasSubstr("unknown tensor type 2"));
  t.type = TensorType::kF32;
  t.dims = {0, 4};
  EXPECT_THAT(std::string(DequantizeToF32(t, absl::MakeSpan(out)).message()),
              HasSubstr("dim 0 is zero"));
}

TEST(GgufSizes, TensorBytesAndElementCount) {
  EXPECT_EQ(*TensorBytes(TensorType::kF32, 10), 40u);
  EXPECT_EQ(*TensorBytes(TensorType::kF16, 10), 20u);
  EXPECT_EQ(*TensorBytes(TensorType::kBF16, 10), 20u);
  EXPECT_EQ(*TensorBytes(TensorType::kQ8_0, 64), 68u);
  EXPECT_EQ(*TensorBytes(TensorType::kF32, (uint64_t{1} << 62) - 1), ~uint64_t{0} - 3);
  EXPECT_THAT(std::string(TensorBytes(TensorType::kQ8_0, 33).status().message()),
              HasSubstr("33 elements of Q8_0 are not a whole number of 32-element blocks"));
  EXPECT_THAT(std::string(TensorBytes(TensorType::kF32, uint64_t{1} << 62).status().message()),
              HasSubstr("overflows"));
  EXPECT_FALSE(TensorBytes(static_cast<TensorType>(2), 1).ok());
  EXPECT_EQ(TensorTypeName(TensorType::kQ8_0), "Q8_0");
  EXPECT_EQ(TensorTypeName(TensorType::kBF16), "BF16");
  EXPECT_EQ(TensorTypeName(static_cast<TensorType>(2)), "?");
  EXPECT_EQ(*ElementCount(std::vector<uint64_t>{2, 3, 4, 5}), 120u);
  EXPECT_FALSE(ElementCount(std::vector<uint64_t>{}).ok());
  EXPECT_FALSE(ElementCount(std::vector<uint64_t>{1, 1, 1, 1, 1}).ok());
  EXPECT_FALSE(ElementCount(std::vector<uint64_t>{uint64_t{1} << 32, uint64_t{1} << 32}).ok());
}

TEST(GgufWriterTest, AlignmentAndVersion) {
  GgufWriter w(2, 64);
  w.AddTensor("a", {3}, TensorType::kF32, std::vector<uint8_t>(12, 1));
  w.AddTensor("b", {1}, TensorType::kF32, std::vector<uint8_t>(4, 2));
  const std::vector<uint8_t> image = w.Serialize();
  EXPECT_EQ(image.size() % 64, 0u);
  auto file = GgufFile::FromBytes(image);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->version(), 2u);
  EXPECT_EQ((*file)->alignment(), 64u);
  EXPECT_EQ(*(*file)->GetInt("general.alignment"), 64);
  EXPECT_EQ((*file)->tensors()[1].offset, 64u);
  EXPECT_EQ((*file)->tensors()[1].data[0], 2);
}

TEST(GgufWriterTest, WriteFileStreamsTheSameImage) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddTensor("a", {3}, TensorType::kF32, std::vector<uint8_t>(12, 1));
  const std::string path = pagoda::testing::MakeTempDir() + "/x.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  EXPECT_EQ(ReadBytes(path), w.Serialize());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetString("general.architecture"), "llama");
}

TEST(GgufWriterTest, WriteFileReportsIoErrors) {
  GgufWriter w;
  w.AddTensor("a", {3}, TensorType::kF32, std::vector<uint8_t>(12, 1));
  absl::Status s = w.WriteFile("/nonexistent-pagoda-dir/x.gguf");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot create"));
  s = w.WriteFile("/dev/full");  // every write fails with ENOSPC
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("writing /dev/full"));
}

TEST(GgufOpen, Errors) {
  auto missing = GgufFile::Open("/nonexistent-pagoda-dir/x.gguf");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  const std::string dir = pagoda::testing::MakeTempDir();
  EXPECT_THAT(std::string(GgufFile::Open(dir).status().message()),
              HasSubstr("is not a regular file"));
  GgufWriter empty;  // a valid file with nothing in it loads
  ASSERT_TRUE(empty.WriteFile(dir + "/empty.gguf").ok());
  EXPECT_TRUE(GgufFile::Open(dir + "/empty.gguf").ok());
  std::FILE* f = std::fopen((dir + "/zero.gguf").c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  auto zero = GgufFile::Open(dir + "/zero.gguf");
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("too short for the magic"));
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("zero.gguf"));
}

TEST(GgufStories, OpensTheRealModel) {
  auto file = GgufFile::Open(pagoda::testing::ModelPath("stories260K.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(f.metadata().size(), 19u);
  const TensorInfo* embd = f.FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(embd->type, TensorType::kF32);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetInt("llama.block_count"), 5);
  EXPECT_EQ(*f.GetFloat("llama.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-5f));
  const std::vector<std::string> tokens = *f.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(f.GetFloatArray("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(f.GetIntArray("tokenizer.ggml.token_type")->size(), 512u);
  // Every tensor's bytes are the file's bytes at data_start + offset.
  const std::vector<uint8_t> bytes = StoriesBytes();
  for (const TensorInfo& t : f.tensors()) {
    ASSERT_LE(kStoriesDataStart + t.offset + t.nbytes, bytes.size()) << t.name;
    EXPECT_EQ(std::memcmp(t.data, bytes.data() + kStoriesDataStart + t.offset, t.nbytes), 0);
    std::vector<float> values(t.num_elements());
    EXPECT_TRUE(DequantizeToF32(t, absl::MakeSpan(values)).ok()) << t.name;
  }
}

TEST(GgufStories, WriterReproducesTheFileByteForByte) {
  const std::vector<uint8_t> original = StoriesBytes();
  auto file = GgufFile::FromBytes(original);
  ASSERT_TRUE(file.ok()) << file.status();
  GgufWriter w;
  for (const auto& [key, value] : (*file)->metadata()) w.AddValue(key, value);
  for (const TensorInfo& t : (*file)->tensors()) {
    w.AddTensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  EXPECT_TRUE(w.Serialize() == original);
}

// ---------------------------------------------------------------------------------------
// Malformed images: one test per check, each naming what is wrong.

TEST(GgufMalformed, BaselineImagesLoad) {
  EXPECT_EQ(ErrorOf(OneTensor({4, 2}, 0, 0, 32)), "<ok>");
  EXPECT_EQ(ErrorOf(Raw().Header(0, 0).bytes), "<ok>");
}

TEST(GgufMalformed, EmptyFile) { EXPECT_THAT(ErrorOf({}), HasSubstr("too short for the magic")); }

TEST(GgufMalformed, BadMagic) {
  std::vector<uint8_t> image = OneTensor({4}, 0, 0, 16);
  image[3] = 'X';
  EXPECT_THAT(ErrorOf(image), HasSubstr("bad magic \"GGUX\""));
}

TEST(GgufMalformed, Version1IsUnsupported) {
  EXPECT_THAT(ErrorOf(Raw().Header(0, 0, 1).bytes), HasSubstr("version 1 is not supported"));
}

TEST(GgufMalformed, UnknownVersionAndBigEndian) {
  EXPECT_THAT(ErrorOf(Raw().Header(0, 0, 4).bytes), HasSubstr("unsupported version 4"));
  EXPECT_THAT(ErrorOf(Raw().Header(0, 0, 0x03000000).bytes),
              HasSubstr("unsupported version 50331648"));
}

TEST(GgufMalformed, TruncatedHeader) {
  std::vector<uint8_t> image = Raw().Header(0, 0).bytes;
  image.resize(12);
  EXPECT_THAT(ErrorOf(image), HasSubstr("truncated: tensor count at byte 8 needs 8 bytes"));
}

TEST(GgufMalformed, AbsurdCounts) {
  EXPECT_THAT(ErrorOf(Raw().Header(uint64_t{1} << 40, 0).Zeros(64).bytes),
              HasSubstr("tensor count 1099511627776 is absurd"));
  EXPECT_THAT(ErrorOf(Raw().Header(0, ~uint64_t{0}).Zeros(64).bytes),
              HasSubstr("kv count 18446744073709551615 is absurd"));
  // Fits the header check, but the metadata leaves no room for the tensor info.
  EXPECT_THAT(ErrorOf(Raw().Header(1, 1).Str("k").U32(8).Str(std::string(40, 'x')).bytes),
              HasSubstr("tensor count 1 cannot fit in the 0 bytes after the metadata"));
}

TEST(GgufMalformed, KeyLengthPastEnd) {
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).U64(1000).Zeros(20).bytes),
              HasSubstr("kv 0: key length 1000 at byte 24 runs past the end"));
}

TEST(GgufMalformed, StringValuePastEnd) {
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).Str("a").U32(8).U64(50).Zeros(3).bytes),
              HasSubstr("kv 0 'a': string value length 50"));
}

TEST(GgufMalformed, TruncatedScalarValue) {
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).Str("a").U32(10).Zeros(3).bytes),
              HasSubstr("kv 0 'a': truncated: value at byte 37 needs 8 bytes"));
}

TEST(GgufMalformed, UnknownValueType) {
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).Str("a").U32(13).U64(0).bytes),
              HasSubstr("kv 0 'a': unknown value type 13 at byte 33"));
}

TEST(GgufMalformed, UnknownArrayItemType) {
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).Str("a").U32(9).U32(99).U64(0).bytes),
              HasSubstr("unknown array item type 99"));
}

TEST(GgufMalformed, ArrayCountPastEndIsRejectedBeforeAllocating) {
  // 2^62 items would need ~2^68 bytes of Values; the count must fail on the size check.
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).Str("a").U32(9).U32(0).U64(uint64_t{1} << 62).bytes),
              HasSubstr("array count 4611686018427387904 at byte 41 cannot fit"));
  // Three uint32 items need 12 bytes; 8 are there.
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).Str("a").U32(9).U32(4).U64(3).Zeros(8).bytes),
              HasSubstr("items need at least 4 bytes each and 8 bytes are left"));
  // Strings need at least their 8-byte length each.
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).Str("a").U32(9).U32(8).U64(5).Zeros(39).bytes),
              HasSubstr("items need at least 8 bytes each"));
}

TEST(GgufMalformed, TooManyMetadataValues) {
  const uint64_t n = kMaxMetadataValues + 1;
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).Str("a").U32(9).U32(0).U64(n).Zeros(n).bytes),
              HasSubstr("exceeds the limit of 4194304 metadata values"));
}

TEST(GgufMalformed, ArraysNestedTooDeep) {
  auto nested = [](int levels) {
    Raw r;
    r.Header(0, 1).Str("a").U32(9);
    for (int k = 1; k < levels; ++k) r.U32(9).U64(1);  // an array holding one array
    return r.U32(0).U64(0).bytes;                      // the innermost: empty uint8 array
  };
  EXPECT_EQ(ErrorOf(nested(kMaxArrayDepth)), "<ok>");
  EXPECT_THAT(ErrorOf(nested(kMaxArrayDepth + 1)), HasSubstr("arrays nested more than 8 deep"));
}

TEST(GgufMalformed, InvalidBool) {
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).Str("a").U32(7).U8(2).bytes),
              HasSubstr("bool byte 2 at byte 37 is neither 0 nor 1"));
}

TEST(GgufMalformed, DuplicateMetadataKey) {
  EXPECT_THAT(ErrorOf(Raw().Header(0, 2).Str("a").U32(4).U32(1).Str("a").U32(4).U32(2).bytes),
              HasSubstr("duplicate metadata key 'a' (kv 0 and 1)"));
}

TEST(GgufMalformed, BadAlignment) {
  auto with_alignment = [](uint32_t type, uint64_t v) {
    Raw r;
    r.Header(0, 1).Str("general.alignment").U32(type);
    return (type == 4 ? r.U32(static_cast<uint32_t>(v)) : r.U64(v)).bytes;
  };
  EXPECT_THAT(ErrorOf(with_alignment(4, 0)),
              HasSubstr("general.alignment 0 is not a nonzero power of two"));
  EXPECT_THAT(ErrorOf(with_alignment(4, 48)),
              HasSubstr("general.alignment 48 is not a nonzero power of two"));
  EXPECT_THAT(ErrorOf(with_alignment(10, 64)),
              HasSubstr("general.alignment has value type 10, not uint32"));
  EXPECT_EQ(ErrorOf(with_alignment(4, 1)), "<ok>");
}

TEST(GgufMalformed, TensorNamePastEnd) {
  EXPECT_THAT(ErrorOf(Raw().Header(1, 0).U64(500).Zeros(40).bytes),
              HasSubstr("tensor 0: tensor name length 500"));
}

TEST(GgufMalformed, OverlongKeyOrName) {
  const std::string long_key(65536, 'k');
  EXPECT_THAT(ErrorOf(Raw().Header(0, 1).Str(long_key).U32(0).U8(1).bytes),
              HasSubstr("key of 65536 bytes is longer than 65535"));
  EXPECT_EQ(ErrorOf(Raw().Header(0, 1).Str(long_key.substr(1)).U32(0).U8(1).bytes), "<ok>");
  Raw r;
  r.Header(1, 0).Info(std::string(65, 'n'), {4}, 0, 0).PadTo(32).Zeros(16);
  const std::string error = ErrorOf(r.bytes);
  // The message shows only the first 64 bytes of the name.
  EXPECT_THAT(error, HasSubstr(absl::StrCat("tensor 0 '", std::string(64, 'n'),
                                            "...': name of 65 bytes is longer than 64")));
}

TEST(GgufMalformed, TruncatedTensorInfo) {
  const std::vector<uint8_t> image =
      Raw().Header(1, 0).Str("weight_name_long").U32(2).U64(4).Zeros(4).bytes;
  EXPECT_THAT(ErrorOf(image),
              HasSubstr("tensor 0 'weight_name_long': truncated: dim at byte 60 needs 8 bytes"));
}

TEST(GgufMalformed, DimsCount) {
  EXPECT_THAT(ErrorOf(OneTensor({}, 0, 0, 32)), HasSubstr("tensor 0 'w': n_dims 0"));
  EXPECT_THAT(ErrorOf(OneTensor({1, 1, 1, 1, 1}, 0, 0, 32)),
              HasSubstr("tensor 0 'w': n_dims 5 at byte 33 is not in 1..4"));
}

TEST(GgufMalformed, ZeroDim) {
  EXPECT_THAT(ErrorOf(OneTensor({4, 0}, 0, 0, 32)),
              HasSubstr("tensor 0 'w': bad shape [4, 0]: dim 1 is zero"));
}

TEST(GgufMalformed, ElementCountOverflow) {
  EXPECT_THAT(ErrorOf(OneTensor({uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0, 32)),
              HasSubstr("element count overflows"));
  // The count fits but its F32 byte size does not.
  EXPECT_THAT(ErrorOf(OneTensor({uint64_t{1} << 31, uint64_t{1} << 31}, 0, 0, 32)),
              HasSubstr("byte size of 4611686018427387904 elements of F32 overflows"));
}

TEST(GgufMalformed, UnknownTensorType) {
  EXPECT_THAT(ErrorOf(OneTensor({32}, 2, 0, 64)), HasSubstr("unknown tensor type 2"));
  EXPECT_THAT(ErrorOf(OneTensor({32}, 31, 0, 64)), HasSubstr("unknown tensor type 31"));
}

TEST(GgufMalformed, Q8RowNotWholeBlocks) {
  EXPECT_EQ(ErrorOf(OneTensor({32, 2}, 8, 0, 68)), "<ok>");
  EXPECT_THAT(ErrorOf(OneTensor({16, 4}, 8, 0, 68)),
              HasSubstr("Q8_0 row length 16 is not a multiple of 32"));
}

TEST(GgufMalformed, MisalignedOffset) {
  EXPECT_THAT(ErrorOf(OneTensor({1}, 0, 4, 64)),
              HasSubstr("tensor 0 'w': offset 4 is not a multiple of the alignment 32"));
}

TEST(GgufMalformed, TensorDataPastEnd) {
  const std::vector<uint8_t> image = OneTensor({4}, 0, 0, 8);  // 16 bytes needed
  EXPECT_THAT(ErrorOf(image),
              HasSubstr(absl::StrCat("tensor 'w' data at offset 0 (+16 bytes) from the data "
                                     "section at byte 64 is past end of file (size ",
                                     image.size(), ")")));
  EXPECT_THAT(ErrorOf(OneTensor({4}, 0, ~uint64_t{31}, 64)),
              HasSubstr("offset 18446744073709551584 (+16 bytes)"));
  // The padding before the data section is itself cut off.
  std::vector<uint8_t> cut = OneTensor({4}, 0, 0, 16);
  cut.resize(60);
  EXPECT_THAT(ErrorOf(cut), HasSubstr("past end of file (size 60)"));
}

TEST(GgufMalformed, DuplicateTensorName) {
  Raw r;
  r.Header(2, 0).Info("w", {4}, 0, 0).Info("w", {4}, 0, 32).PadTo(32).Zeros(64);
  EXPECT_THAT(ErrorOf(r.bytes), HasSubstr("duplicate tensor name 'w' (tensors 0 and 1)"));
}

TEST(GgufMalformed, OverlappingTensorData) {
  Raw r;
  r.Header(2, 0).Info("b", {8}, 0, 32).Info("a", {16}, 0, 0).PadTo(32).Zeros(96);
  EXPECT_THAT(ErrorOf(r.bytes),
              HasSubstr("tensors 'a' [0, 64) and 'b' [32, 64) overlap in the data section"));
}

// ---------------------------------------------------------------------------------------
// Sweeps over damaged copies of real files: an error or a usable file, never a crash.

// Parses `image`; for an OK result dequantizes every tensor (which must succeed).
// Returns whether it parsed.
bool ParseAndTouch(std::vector<uint8_t> image) {
  auto file = GgufFile::FromBytes(std::move(image));
  if (!file.ok()) {
    EXPECT_THAT(std::string(file.status().message()), StartsWith("gguf: "));
    return false;
  }
  for (const TensorInfo& t : (*file)->tensors()) {
    std::vector<float> out(t.num_elements());
    absl::Status s = DequantizeToF32(t, absl::MakeSpan(out));
    EXPECT_TRUE(s.ok()) << s;
  }
  return true;
}

TEST(GgufSweep, EveryTruncationOfTheStoriesHeader) {
  const std::vector<uint8_t> bytes = StoriesBytes();
  ASSERT_GT(bytes.size(), kStoriesDataStart);
  int loaded = 0;
  for (size_t len = 0; len <= kStoriesDataStart; ++len) {
    loaded += ParseAndTouch(std::vector<uint8_t>(bytes.begin(), bytes.begin() + len));
  }
  EXPECT_EQ(loaded, 0);  // tensor data is missing from every one of them
  for (size_t len : {kStoriesDataStart + 1, kStoriesDataStart + 131072,
                     kStoriesDataStart + 131072 + 255, bytes.size() - 1}) {
    EXPECT_THAT(ErrorOf(std::vector<uint8_t>(bytes.begin(), bytes.begin() + len)),
                HasSubstr("past end of file"))
        << len;
  }
  EXPECT_TRUE(ParseAndTouch(bytes));
}

// Flips 1..8 random bits of `original` per trial; half the trials only in [0, hot_end).
void BitFlipSweep(const std::vector<uint8_t>& original, size_t hot_end, int trials) {
  std::mt19937_64 rng(20240601);
  int loaded = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<uint8_t> image = original;
    const size_t end = trial % 2 == 0 ? hot_end : image.size();
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < flips; ++k) {
      const uint64_t bit = rng() % (end * 8);
      image[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    }
    SCOPED_TRACE(absl::StrCat("trial ", trial));
    loaded += ParseAndTouch(std::move(image));
  }
  // Both outcomes occur: the sweep is not vacuous.
  EXPECT_GT(loaded, 0);
  EXPECT_LT(loaded, trials);
}

TEST(GgufSweep, RandomBitFlipsOfStories) { BitFlipSweep(StoriesBytes(), kStoriesDataStart, 2000); }

TEST(GgufSweep, RandomBitFlipsOfEveryValueType) {
  const std::vector<uint8_t> image = AllTypesImage();
  BitFlipSweep(image, image.size(), 2000);
}

}  // namespace
}  // namespace pagoda::gguf
