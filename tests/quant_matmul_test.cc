// The CPU backend's products with weights kept in ggml block formats and 16-bit types:
// equal to dequantize-then-dot in double (activations quantized as ggml does) for every
// type, at odd sizes, into strided output views, single- and multi-threaded; the weight
// keeps its file size in memory; Embed dequantizes rows; the quantizers round-trip.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu_isa.h"
#include "kernels/quant/activation_quant.h"
#include "kernels/quant/dequantize.h"
#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"
#include "kernels/quant/quantize.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/quant/vec_dot_avx2.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace pagoda::kernels {
namespace {

const DType kWeightTypes[] = {DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                              DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K,
                              DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// `v` ([rows, cols]) in `type`, row by row.
std::vector<uint8_t> Quantize(DType type, const std::vector<float>& v, int64_t cols) {
  const size_t row = DTypeRowBytes(type, cols);
  const int64_t rows = static_cast<int64_t>(v.size()) / cols;
  std::vector<uint8_t> out(row * rows);
  for (int64_t r = 0; r < rows; ++r) {
    quant::QuantizeRow(type, v.data() + r * cols, out.data() + r * row, cols);
  }
  return out;
}

std::vector<float> Dequantize(DType type, const void* data, int64_t n) {
  std::vector<float> out(n);
  quant::DequantizeRow(type, data, out.data(), n);
  return out;
}

std::unique_ptr<Backend> Cpu(int threads) {
  auto b = CreateBackend({.device = DeviceKind::kCpu, .num_threads = threads});
  EXPECT_TRUE(b.ok()) << b.status();
  return std::move(*b);
}

// Q4_1/Q5_1 times Q8_1: ggml adds each block's min times the activation block's stored
// s = fp16(d * sum(q)), not times the sum of the dequantized activations. Returns what
// that changes: sum over blocks of m * (s - d * sum(q)).
double MinTermCorrection(DType type, const uint8_t* w, const uint8_t* act, int64_t k) {
  double c = 0;
  for (int64_t b = 0; b < k / 32; ++b) {
    const auto* y = reinterpret_cast<const quant::BlockQ8_1*>(act) + b;
    uint16_t m_bits;
    std::memcpy(&m_bits, w + b * DTypeBlockBytes(type) + 2, 2);  // m follows d in both
    int sum = 0;
    for (int i = 0; i < 32; ++i) sum += y->qs[i];
    const double d = quant::HalfToFloat(y->d);
    c += quant::HalfToFloat(m_bits) * (quant::HalfToFloat(y->s) - d * sum);
  }
  return c;
}

// x [n, k] times w [m, k]^T into columns [1, 1 + m) of a [n, m + 3] buffer, against the
// reference; the other columns must stay untouched.
void CheckProduct(DType type, int64_t n, int64_t m, int64_t k, int threads) {
  SCOPED_TRACE(std::string(DTypeName(type)) + " n=" + std::to_string(n) +
               " m=" + std::to_string(m) + " k=" + std::to_string(k) +
               " threads=" + std::to_string(threads));
  auto backend = Cpu(threads);
  const std::vector<float> wf = Random(m * k, 1);
  std::vector<float> x = Random(n * k, 2);
  for (int64_t i = 0; i < n * k; i += 7) x[i] *= 4.f;  // uneven magnitudes within blocks
  const std::vector<uint8_t> wq = Quantize(type, wf, k);
  auto w = backend->CreateWeightRaw(type, wq.data(), m, k);
  ASSERT_TRUE(w.ok()) << w.status();
  const int64_t width = m + 3;
  std::vector<float> out(n * width, -777.f);
  backend->MatMul(Tensor::Make(x.data(), DType::kF32, n, k), w->view,
                  Tensor::Make(out.data(), DType::kF32, n, width).Cols(1, m));
  const DType act = quant::VecDotType(type);
  std::vector<uint8_t> aq(DTypeRowBytes(act, k));
  for (int64_t r = 0; r < n; ++r) {
    quant::QuantizeActivations(act, x.data() + r * k, aq.data(), k);
    const std::vector<float> a = Dequantize(act, aq.data(), k);
    EXPECT_EQ(out[r * width], -777.f);
    EXPECT_EQ(out[r * width + m + 1], -777.f);
    for (int64_t c = 0; c < m; ++c) {
      const std::vector<float> wr = Dequantize(type, wq.data() + c * DTypeRowBytes(type, k), k);
      double dot = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        dot += double{wr[i]} * a[i];
        mag += std::fabs(double{wr[i]} * a[i]);
      }
      if (act == DType::kQ8_1)
        dot += MinTermCorrection(type, wq.data() + c * DTypeRowBytes(type, k), aq.data(), k);
      ASSERT_NEAR(out[r * width + 1 + c], dot, 2e-6 * mag + 1e-6) << "row " << r << " col " << c;
    }
  }
}

TEST(QuantMatMul, EveryTypeEqualsDequantizedReference) {
  for (DType t : kWeightTypes) CheckProduct(t, 3, 37, 512, 1);
}

TEST(QuantMatMul, OddBatchesAndThreads) {
  for (DType t : kWeightTypes) CheckProduct(t, 5, 131, 1024, 3);
  CheckProduct(DType::kQ4_0, 1, 9, 32, 2);
  CheckProduct(DType::kQ4_1, 7, 3, 96, 2);
}

TEST(QuantMatMul, WeightKeepsItsFileSize) {
  auto backend = Cpu(1);
  const int64_t m = 64, k = 512;
  const std::vector<float> wf = Random(m * k, 3);
  for (DType t : kWeightTypes) {
    const std::vector<uint8_t> wq = Quantize(t, wf, k);
    auto w = backend->CreateWeightRaw(t, wq.data(), m, k);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->buffer.bytes(), wq.size()) << DTypeName(t);
    EXPECT_LT(w->buffer.bytes(), static_cast<size_t>(m * k * 4) / 1.9) << DTypeName(t);
    std::vector<float> back(m * k);
    ASSERT_TRUE(backend->ReadF32(w->view, back.data()).ok());
    EXPECT_EQ(back, Dequantize(t, wq.data(), m * k)) << DTypeName(t);
  }
  // Q4_0 of 4096 x 4096 is 9 MiB, not the 64 MiB an f32 copy takes.
  EXPECT_EQ(DTypeRowBytes(DType::kQ4_0, int64_t{4096} * 4096), size_t{4096} * 4096 / 32 * 18);
}

TEST(QuantMatMul, RejectsPartialBlocksAndActivationTypes) {
  auto backend = Cpu(1);
  std::vector<uint8_t> bytes(1024);
  EXPECT_FALSE(backend->CreateWeightRaw(DType::kQ4_K, bytes.data(), 1, 128).ok());
  EXPECT_FALSE(backend->CreateWeightRaw(DType::kQ8_K, bytes.data(), 1, 256).ok());
  EXPECT_FALSE(backend->CreateWeightRaw(DType::kQ4_0, bytes.data(), 1, 48).ok());
}

TEST(QuantMatMul, EmbedDequantizesRows) {
  auto backend = Cpu(1);
  const int64_t vocab = 10, dim = 256;
  const std::vector<float> table = Random(vocab * dim, 4);
  BatchInput batch;
  batch.token_ids = {7, 0, 7, 3};
  batch.positions = {0, 1, 2, 3};
  batch.slot_mapping = {0, 1, 2, 3};
  batch.query_start_loc = {0, 4};
  batch.seq_lens = {4};
  batch.block_tables = {0};
  batch.max_blocks_per_seq = 1;
  ASSERT_TRUE(backend->PrepareBatch(batch).ok());
  for (DType t : kWeightTypes) {
    const std::vector<uint8_t> q = Quantize(t, table, dim);
    auto w = backend->CreateWeightRaw(t, q.data(), vocab, dim);
    ASSERT_TRUE(w.ok());
    std::vector<float> out(4 * dim);
    backend->Embed(w->view, Tensor::Make(out.data(), DType::kF32, 4, dim));
    for (int i = 0; i < 4; ++i) {
      const int id = batch.token_ids[i];
      EXPECT_EQ(std::vector<float>(out.begin() + i * dim, out.begin() + (i + 1) * dim),
                Dequantize(t, q.data() + id * DTypeRowBytes(t, dim), dim))
          << DTypeName(t);
    }
  }
}

// Relative RMS error of quantize -> dequantize, against a bound per type that a wrong
// layout (swapped nibbles, misplaced scales) exceeds by far.
TEST(Quantizers, RoundTripErrorIsSmall) {
  const std::vector<float> x = Random(4096, 5);
  const std::pair<DType, double> bounds[] = {
      {DType::kF16, 1e-3},  {DType::kBF16, 5e-3}, {DType::kQ8_0, 0.01}, {DType::kQ6_K, 0.03},
      {DType::kQ5_0, 0.05}, {DType::kQ5_1, 0.05}, {DType::kQ5_K, 0.05}, {DType::kQ4_0, 0.12},
      {DType::kQ4_1, 0.12}, {DType::kQ4_K, 0.1},  {DType::kQ3_K, 0.25}, {DType::kQ2_K, 0.45}};
  for (const auto& [t, bound] : bounds) {
    const std::vector<uint8_t> q = Quantize(t, x, 4096);
    ASSERT_EQ(q.size(), DTypeRowBytes(t, 4096));
    const std::vector<float> y = Dequantize(t, q.data(), 4096);
    double err = 0, sig = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (double{x[i]} - y[i]) * (double{x[i]} - y[i]);
      sig += double{x[i]} * x[i];
    }
    EXPECT_LT(std::sqrt(err / sig), bound) << DTypeName(t);
    EXPECT_GT(std::sqrt(err / sig), bound / 50) << DTypeName(t);  // it did quantize
  }
}

// Hand-checked blocks: Q4_0 of 0..31 - 16 (d = -16 / -8 = 2) and Q8_K's block sums.
// The AVX2 activation quantizers write the portable code's bytes: random rows of uneven
// magnitudes, and blocks that are all zero, whose largest magnitude is negative or tied
// between x and -x (the first one sets the sign), that hold one huge value, values scaled to
// exact halves (ties to even), or only subnormals (their scale overflows).
TEST(Quantizers, ActivationAvx2EqualsPortableBitForBit) {
  if (!CpuRuns(CpuIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  for (int64_t n : {256, 512, 4096}) {
    std::vector<float> x = Random(n, static_cast<uint32_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] *= static_cast<float>(1 + (i % 7) * (i % 5));
    for (int64_t i = 0; i < 32; ++i) x[i] = 0.f;                               // a zero Q8_0 block
    for (int64_t i = 32; i < 64; ++i) x[i] = static_cast<float>(i % 9) - 4.f;  // ties: -4 first
    x[70] = -1e30f;                                                            // huge, negative
    for (int64_t i = 96; i < 128; ++i) x[i] = 0.5f * static_cast<float>(i - 112);  // halves
    x[127] = 127.f;  // scale 1: quants are x, the halves round to even
    for (int64_t i = 128; i < 160; ++i) x[i] = 1e-40f * static_cast<float>(i % 3);  // subnormal
    if (n > 256) {
      for (int64_t i = 256; i < 512; ++i) x[i] = 1e-39f * static_cast<float>(i % 5 - 2);
    }
    if (n > 512) {
      for (int64_t i = 512; i < 768; ++i) x[i] = 0.f;  // a zero Q8_K block
    }
    for (DType type : {DType::kQ8_0, DType::kQ8_1, DType::kQ8_K}) {
      const size_t bytes = DTypeRowBytes(type, n);
      std::vector<uint8_t> want(bytes, 0xAB), got(bytes, 0xCD);
      quant::QuantizeActivationsPortable(type, x.data(), want.data(), n);
      ASSERT_TRUE(quant::QuantizeActivationsAvx2(type, x.data(), got.data(), n));
      EXPECT_EQ(got, want) << DTypeName(type) << " n=" << n;
    }
  }
  std::vector<uint8_t> out(4, 0);
  EXPECT_FALSE(quant::QuantizeActivationsAvx2(DType::kF16, nullptr, out.data(), 0));
}

TEST(Quantizers, HandCheckedBlocks) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  quant::BlockQ4_0 b;
  quant::QuantizeRow(DType::kQ4_0, x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x4000);  // 2.0 in binary16
  // x = -16 -> q = trunc(-8 + 8.5) = 0; x = -15 -> trunc(-7.5 + 8.5) = 1; x = 15 -> 15.
  EXPECT_EQ(b.qs[0] & 0xF, 0);
  EXPECT_EQ(b.qs[1] & 0xF, 1);
  EXPECT_EQ(b.qs[15] >> 4, 15);
  const std::vector<float> y = Dequantize(DType::kQ4_0, &b, 32);
  EXPECT_EQ(y[0], -16.f);
  EXPECT_EQ(y[1], -14.f);
  EXPECT_EQ(y[31], 14.f);

  const std::vector<float> a = Random(256, 6);
  quant::BlockQ8_K k;
  quant::QuantizeActivations(DType::kQ8_K, a.data(), &k, 256);
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += k.qs[16 * g + i];
    EXPECT_EQ(k.bsums[g], sum);
  }
  // Q8_0 activations round ties to even: 0.5 * 127 / 127 -> 0.5 -> 0, 1.5 -> 2.
  std::vector<float> t(32, 0.f);
  t[0] = 127.f;
  t[1] = 0.5f;
  t[2] = 1.5f;
  t[3] = -2.5f;
  quant::BlockQ8_0 q8;
  quant::QuantizeActivations(DType::kQ8_0, t.data(), &q8, 32);
  EXPECT_EQ(q8.qs[0], 127);
  EXPECT_EQ(q8.qs[1], 0);
  EXPECT_EQ(q8.qs[2], 2);
  EXPECT_EQ(q8.qs[3], -2);
}

// splitmix64, as tests/ggml_vec_dot_gen.cc draws the inputs.
struct SplitMix {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float Sym() { return static_cast<float>(Next() >> 40) / 8388608.f - 1.f; }
};

// Every weight type's dot product equals ggml-cpu's x86 (AVX2) result bit for bit: the
// activation quantization, the integer sums and the float accumulation order
// (tests/data/ggml_vec_dot.json, written by tests/ggml_vec_dot_gen.cc), at every
// instruction-set level this CPU runs.
class DotProductsAtLevel : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(DotProductsAtLevel, EqualGgmlCpuBitForBit) {
  ScopedCpuIsaCap cap(GetParam());
  if (!cap.ok()) GTEST_SKIP() << "this CPU does not run " << CpuIsaName(GetParam());
  const auto want = nlohmann::json::parse(
      pagoda::testing::ReadFileOrDie(pagoda::testing::ModelPath("ggml_vec_dot.json")));
  const DType order[] = {DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                         DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K,
                         DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  for (int t = 0; t < 12; ++t) {
    const DType d = order[t];
    const auto& expected = want.at(std::string(DTypeName(d)));
    ASSERT_EQ(expected.size(), 16u);
    for (int c = 0; c < 16; ++c) {
      const int n =
          (d == DType::kF16 || d == DType::kBF16) ? 256 + 8 * c + (c % 3) : 256 * (1 + c % 3);
      SplitMix rng{static_cast<uint64_t>(1000 * t + c)};
      std::vector<float> w(n), x(n);
      for (int i = 0; i < n; ++i) w[i] = rng.Sym() * static_cast<float>(1 + i % 5);
      for (int i = 0; i < n; ++i) {
        x[i] = rng.Sym() * static_cast<float>(1 + i % 7) * static_cast<float>(c + 1);
      }
      const DType act = quant::VecDotType(d);
      std::vector<uint8_t> wq(DTypeRowBytes(d, n)), a(DTypeRowBytes(act, n));
      quant::QuantizeRow(d, w.data(), wq.data(), n);
      quant::QuantizeActivations(act, x.data(), a.data(), n);
      for (const bool portable : {false, true}) {
        const float got = portable ? quant::VecDotPortable(d, n, wq.data(), a.data())
                                   : quant::VecDot(d, n, wq.data(), a.data());
        uint32_t bits;
        std::memcpy(&bits, &got, 4);
        EXPECT_EQ(bits, expected[c].get<uint32_t>())
            << DTypeName(d) << " case " << c << (portable ? " (portable)" : "") << ": " << got;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(QuantMatMul, DotProductsAtLevel,
                         ::testing::Values(CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512,
                                           CpuIsa::kAvx512Vnni),
                         [](const auto& info) { return std::string(CpuIsaName(info.param)); });

}  // namespace
}  // namespace pagoda::kernels
