// Malformed GGUF files: one test per kind of damage, every truncation of the stories260K
// header, and random bit flips; each must end in OK or an error status, never a crash or
// an out-of-bounds read (the suite also runs under ASan+UBSan: `make asan`).
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "tests/gguf_test_util.h"

namespace pagoda::gguf::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

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
  EXPECT_THAT(ErrorOf(OneTensor({32}, 4, 0, 64)), HasSubstr("unknown tensor type 4"));
  EXPECT_THAT(ErrorOf(OneTensor({256}, 16, 0, 64)),
              HasSubstr("has type IQ2_XXS, which pagoda does not support"));
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
}  // namespace pagoda::gguf::test
