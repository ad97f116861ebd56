// GGUF reader/writer: round trips of every value and tensor type and the real stories260K
// model. Malformed files and the truncation / bit-flip sweeps are in
// gguf_malformed_test.cc.
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
#include "tests/gguf_test_util.h"
#include "tests/test_util.h"

namespace pagoda::gguf::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

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
  t.type = static_cast<TensorType>(4);
  t.nbytes = 16;
  EXPECT_THAT(std::string(DequantizeToF32(t, absl::MakeSpan(out)).message()),
              HasSubstr("unknown tensor type 4"));
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
  EXPECT_EQ(*TensorBytes(TensorType::kQ4_0, 64), 36u);
  EXPECT_EQ(*TensorBytes(TensorType::kQ4_1, 64), 40u);
  EXPECT_EQ(*TensorBytes(TensorType::kQ5_0, 64), 44u);
  EXPECT_EQ(*TensorBytes(TensorType::kQ5_1, 64), 48u);
  EXPECT_EQ(*TensorBytes(TensorType::kQ2_K, 512), 168u);
  EXPECT_EQ(*TensorBytes(TensorType::kQ3_K, 512), 220u);
  EXPECT_EQ(*TensorBytes(TensorType::kQ4_K, 512), 288u);
  EXPECT_EQ(*TensorBytes(TensorType::kQ5_K, 512), 352u);
  EXPECT_EQ(*TensorBytes(TensorType::kQ6_K, 512), 420u);
  EXPECT_THAT(std::string(TensorBytes(TensorType::kQ4_K, 32).status().message()),
              HasSubstr("32 elements of Q4_K are not a whole number of 256-element blocks"));
  EXPECT_FALSE(TensorBytes(static_cast<TensorType>(4), 1).ok());
  EXPECT_FALSE(TensorBytes(static_cast<TensorType>(16), 256).ok());  // IQ2_XXS
  EXPECT_EQ(TensorTypeName(TensorType::kQ8_0), "Q8_0");
  EXPECT_EQ(TensorTypeName(TensorType::kBF16), "BF16");
  EXPECT_EQ(TensorTypeName(TensorType::kQ4_K), "Q4_K");
  EXPECT_EQ(TensorTypeName(static_cast<TensorType>(16)), "IQ2_XXS");
  EXPECT_EQ(TensorTypeName(static_cast<TensorType>(4)), "?");
  EXPECT_EQ(TensorTypeName(static_cast<TensorType>(99)), "?");
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

}  // namespace
}  // namespace pagoda::gguf::test
