// The block formats against llama.cpp's own outputs (tests/data/quant_ref_{models,dequant}.tar.xz):
// dequantization of every type equals gguf-py's, and pagoda's quantizer writes the same
// bytes llama-quantize wrote from the same F32 source.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/quant/quantize.h"
#include "model/gguf.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

const char* const kTypes[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                              "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};

std::unique_ptr<gguf::GgufFile> Open(const std::string& name) {
  auto f = gguf::GgufFile::Open(testing::ModelPath("quant_ref/" + name));
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

std::vector<float> ReadF32File(const std::string& name) {
  const std::string bytes = testing::ReadFileOrDie(testing::ModelPath("quant_ref/" + name));
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

TEST(QuantRef, DequantizationEqualsGgufPy) {
  for (const std::string type : kTypes) {
    auto file = Open("qref-" + type + ".gguf");
    ASSERT_NE(file, nullptr);
    for (const std::string tensor : {"blk.0.attn_q.weight", "blk.0.ffn_down.weight"}) {
      SCOPED_TRACE(type + " " + tensor);
      const gguf::TensorInfo* t = file->FindTensor(tensor);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(gguf::TensorTypeName(t->type), type);
      const std::vector<float> want = ReadF32File("qref-" + type + "." + tensor + ".f32");
      std::vector<float> got(t->num_elements());
      ASSERT_EQ(got.size(), want.size());
      ASSERT_TRUE(gguf::DequantizeToF32(*t, absl::MakeSpan(got)).ok());
      int64_t bit_exact = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - want[i]), 1e-6 * std::fabs(want[i])) << "element " << i;
        bit_exact += std::memcmp(&got[i], &want[i], 4) == 0;
      }
      EXPECT_EQ(bit_exact, static_cast<int64_t>(got.size()));
    }
  }
}

// Every 2-D tensor of the F32 source, quantized by pagoda, equals llama-quantize's bytes
// (ggml's reference quantizers are deterministic and built without FMA contraction).
TEST(QuantRef, QuantizerBytesEqualLlamaQuantize) {
  auto source = Open("qref-F32.gguf");
  ASSERT_NE(source, nullptr);
  for (const std::string type : kTypes) {
    auto file = Open("qref-" + type + ".gguf");
    ASSERT_NE(file, nullptr);
    int checked = 0;
    for (const gguf::TensorInfo& src : source->tensors()) {
      if (src.dims.size() != 2) continue;
      SCOPED_TRACE(type + " " + src.name);
      const gguf::TensorInfo* want = file->FindTensor(src.name);
      ASSERT_NE(want, nullptr);
      const kernels::DType dt = gguf::ToDType(want->type);
      std::vector<float> x(src.num_elements());
      ASSERT_TRUE(gguf::DequantizeToF32(src, absl::MakeSpan(x)).ok());
      const auto cols = static_cast<int64_t>(src.dims[0]);
      const size_t row_bytes = kernels::DTypeRowBytes(dt, cols);
      std::vector<uint8_t> got(row_bytes * src.dims[1]);
      for (uint64_t r = 0; r < src.dims[1]; ++r) {
        kernels::quant::QuantizeRow(dt, x.data() + r * cols, got.data() + r * row_bytes, cols);
      }
      ASSERT_EQ(got.size(), want->nbytes);
      size_t first_diff = got.size();
      for (size_t i = 0; i < got.size(); ++i) {
        if (got[i] != want->data[i]) {
          first_diff = i;
          break;
        }
      }
      EXPECT_EQ(first_diff, got.size())
          << "first differing byte (block " << first_diff / kernels::DTypeBlockBytes(dt) << ")";
      ++checked;
    }
    EXPECT_EQ(checked, 9) << type;  // token_embd, output, 7 layer matrices
  }
}

}  // namespace
}  // namespace pagoda
