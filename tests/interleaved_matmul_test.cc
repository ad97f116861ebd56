// Interleaved weights (kernels/quant/interleaved.h), the CPU backend's matmul
// layouts for Q4_K and Q8_0 on AVX-512 VNNI: interleaving moves bytes only (every row
// dequantizes to the file type's floats); each portable definition computes the file type's
// dot product (within float rounding of VecDot); each kernel equals its definition bit for
// bit for every activation row count, group count and width, on random and extreme inputs;
// and the CPU backend, which interleaves matmul-only weights where the CPU runs the kernels,
// gives every output element the same bits whatever the batch shape and thread count, and
// reads the weight back unchanged.
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu_isa.h"
#include "kernels/quant/activation_quant.h"
#include "kernels/quant/dequantize.h"
#include "kernels/quant/half.h"
#include "kernels/quant/interleaved.h"
#include "kernels/quant/quant_types.h"
#include "kernels/quant/quantize.h"
#include "kernels/quant/vec_dot.h"
#include "tests/quant_test_util.h"

namespace pagoda::kernels {
namespace {

constexpr int kGroupRows = quant::kInterleavedRows;

using testing::Bits;
using testing::RandomRows;

std::vector<uint8_t> Quantize(DType type, const std::vector<float>& x, int64_t rows, int64_t k) {
  const size_t row = DTypeRowBytes(type, k);
  std::vector<uint8_t> q(row * rows);
  for (int64_t r = 0; r < rows; ++r)
    quant::QuantizeRow(type, x.data() + r * k, q.data() + r * row, k);
  return q;
}

std::vector<uint8_t> ActivationRows(DType act, const std::vector<float>& x, int64_t rows,
                                    int64_t k) {
  const size_t row = DTypeRowBytes(act, k);
  std::vector<uint8_t> a(row * rows);
  for (int64_t r = 0; r < rows; ++r) {
    quant::QuantizeActivations(act, x.data() + r * k, a.data() + r * row, k);
  }
  return a;
}

// One interleaved layout's functions, for the file type `type`.
struct Layout {
  DType type;
  DType interleaved;
  void (*interleave)(const void*, int64_t, int64_t, void*);
  void (*dequantize)(const void*, int64_t, int64_t, float*);
  float (*dot)(const void*, int, int64_t, const void*);
  void (*rows)(int64_t, const void*, int64_t, const quant::ActRows&, float*, int64_t);
};

const Layout kLayouts[] = {
    {DType::kQ4_K, DType::kQ4_Kx16, quant::InterleaveQ4_K, quant::DequantizeQ4_Kx16Row,
     quant::VecDotQ4_Kx16, quant::VecDotQ4_Kx16Rows},
    {DType::kQ8_0, DType::kQ8_0x16, quant::InterleaveQ8_0, quant::DequantizeQ8_0x16Row,
     quant::VecDotQ8_0x16, quant::VecDotQ8_0x16Rows},
    {DType::kQ6_K, DType::kQ6_Kx16, quant::InterleaveQ6_K, quant::DequantizeQ6_Kx16Row,
     quant::VecDotQ6_Kx16, quant::VecDotQ6_Kx16Rows},
};

// Activation rows as the kernels read them (QuantMatMul's layout): Q8_K rows with their
// sub-block sums; Q8_0 rows with their widened scales and biased quants.
struct KernelActs {
  std::vector<uint8_t> rows;
  std::vector<float> scales;
  std::vector<uint8_t> biased;
  std::vector<int16_t> sums;
  quant::ActRows act;
  KernelActs(DType type, std::vector<uint8_t> a, int count, int64_t k) : rows(std::move(a)) {
    const DType act_type = quant::VecDotType(type);
    act = {.data = rows.data(), .stride = DTypeRowBytes(act_type, k), .rows = count};
    if (act_type == DType::kQ8_K) {
      sums.resize(count * k / 32);
      for (int r = 0; r < count; ++r) {
        quant::SumPairsQ8_K(rows.data() + r * act.stride, k, sums.data() + r * k / 32);
      }
      act.qs = reinterpret_cast<const int8_t*>(sums.data());
      return;
    }
    scales.resize(count * k / 32);
    biased.resize(count * k);
    for (int r = 0; r < count; ++r) {
      quant::WidenScales(rows.data() + r * act.stride, k, scales.data() + r * k / 32);
      quant::BiasQuantsQ8_0(rows.data() + r * act.stride, k, biased.data() + r * k);
    }
    act.scales = scales.data();
    act.scale_stride = static_cast<size_t>(k / 32);
    act.qs = reinterpret_cast<const int8_t*>(biased.data());
  }
};

// gtest's name for a layout in its messages (instead of the struct's bytes).
void PrintTo(const Layout& l, std::ostream* os) { *os << DTypeName(l.type); }

class Interleaved : public ::testing::TestWithParam<Layout> {};

TEST_P(Interleaved, KeepsEveryRowsValues) {
  const Layout& l = GetParam();
  const int64_t rows = 48, k = 768;
  const std::vector<uint8_t> q = Quantize(l.type, RandomRows(rows, k, 1, false), rows, k);
  std::vector<uint8_t> x(DTypeRowBytes(l.interleaved, k) * rows);
  l.interleave(q.data(), rows, k, x.data());
  std::vector<float> want(k), got(k);
  for (int64_t r = 0; r < rows; ++r) {
    quant::DequantizeRow(l.type, q.data() + r * DTypeRowBytes(l.type, k), want.data(), k);
    l.dequantize(x.data(), r, k, got.data());
    for (int64_t i = 0; i < k; ++i) ASSERT_EQ(Bits(got[i]), Bits(want[i])) << r << " " << i;
  }
}

TEST_P(Interleaved, DefinitionIsTheFileTypesDotProduct) {
  const Layout& l = GetParam();
  const DType act = quant::VecDotType(l.type);
  const int64_t rows = kGroupRows, k = 1024;
  for (bool extreme : {false, true}) {
    const std::vector<uint8_t> q = Quantize(l.type, RandomRows(rows, k, 2, extreme), rows, k);
    std::vector<uint8_t> x(DTypeRowBytes(l.interleaved, k) * rows);
    l.interleave(q.data(), rows, k, x.data());
    const std::vector<uint8_t> a = ActivationRows(act, RandomRows(3, k, 3, extreme), 3, k);
    std::vector<float> wf(k), af(k);
    for (int r = 0; r < 3; ++r) {
      const uint8_t* ar = a.data() + r * DTypeRowBytes(act, k);
      quant::DequantizeRow(act, ar, af.data(), k);
      for (int c = 0; c < rows; ++c) {
        const uint8_t* wr = q.data() + c * DTypeRowBytes(l.type, k);
        quant::DequantizeRow(l.type, wr, wf.data(), k);
        // Both round floats differently: allow a few ulps of the terms' magnitude (a Q4_K
        // weight is d * scale * q - dmin * min, whose two parts cancel in sums).
        double magnitude = 0;
        for (int64_t i = 0; i < k; ++i) {
          double min = 0;
          if (l.type == DType::kQ4_K) {
            const auto* blocks = reinterpret_cast<const quant::BlockQ4_K*>(wr);
            uint8_t sc, mn;
            quant::ScaleMinK4(static_cast<int>(i % 256 / 32), blocks[i / 256].scales, &sc, &mn);
            min = quant::HalfToFloat(blocks[i / 256].dmin) * mn;
          }
          magnitude += (std::fabs(double{wf[i]}) + 2 * min) * std::fabs(double{af[i]});
        }
        const float want = quant::VecDot(l.type, k, wr, ar);
        const float got = l.dot(x.data(), c, k, ar);
        EXPECT_NEAR(got, want, 1e-5 * magnitude) << r << " " << c;
      }
    }
  }
}

TEST_P(Interleaved, KernelEqualsDefinitionForEveryRowCount) {
  if (!CpuRuns(CpuIsa::kAvx512Vnni)) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  const Layout& l = GetParam();
  const DType act_type = quant::VecDotType(l.type);
  for (int64_t k : {256, 512, 2048}) {
    for (int64_t groups : {1, 3}) {
      for (bool extreme : {false, true}) {
        const int64_t m = groups * kGroupRows;
        const std::vector<uint8_t> q = Quantize(l.type, RandomRows(m, k, 4, extreme), m, k);
        std::vector<uint8_t> x(DTypeRowBytes(l.interleaved, k) * m);
        l.interleave(q.data(), m, k, x.data());
        const size_t act_row = DTypeRowBytes(act_type, k);
        const KernelActs acts(
            l.type,
            ActivationRows(act_type, RandomRows(quant::kVecDotRows, k, 5, extreme),
                           quant::kVecDotRows, k),
            quant::kVecDotRows, k);
        for (int rows = 1; rows <= quant::kVecDotRows; ++rows) {
          SCOPED_TRACE("k=" + std::to_string(k) + " groups=" + std::to_string(groups) +
                       " rows=" + std::to_string(rows) + (extreme ? " extreme" : ""));
          const int64_t os = m + 5;  // a padded output row
          std::vector<float> out(rows * os, 7.f);
          quant::ActRows act = acts.act;
          act.rows = rows;
          l.rows(k, x.data(), groups, act, out.data(), os);
          const size_t group_bytes = DTypeRowBytes(l.interleaved, k) * kGroupRows;
          for (int r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < m; ++c) {
              const float want = l.dot(x.data() + c / kGroupRows * group_bytes, c % kGroupRows, k,
                                       acts.rows.data() + r * act_row);
              ASSERT_EQ(Bits(out[r * os + c]), Bits(want)) << "row " << r << " col " << c;
            }
            for (int64_t c = m; c < os; ++c) ASSERT_EQ(out[r * os + c], 7.f);
          }
        }
      }
    }
  }
}

// x [n, k] times w [m, k]^T through the CPU backend, after PrepareMatMulWeight, equals row by
// row what one activation row alone gives, bit for bit (and, interleaved, the definition);
// the weight reads back as the file type's values.
void CheckBackend(const Layout& l, int64_t n, int64_t m, int64_t k, int threads) {
  SCOPED_TRACE(std::string(DTypeName(l.type)) + " n=" + std::to_string(n) +
               " m=" + std::to_string(m) + " k=" + std::to_string(k) +
               " threads=" + std::to_string(threads));
  auto backend = CreateBackend({.device = DeviceKind::kCpu, .num_threads = threads});
  ASSERT_TRUE(backend.ok()) << backend.status();
  const std::vector<uint8_t> q = Quantize(l.type, RandomRows(m, k, 6, false), m, k);
  auto w = (*backend)->CreateWeightRaw(l.type, q.data(), m, k);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*backend)->PrepareMatMulWeight(&*w).ok());
  const bool interleaved = CpuIsaActive(CpuIsa::kAvx512Vnni) && m % kGroupRows == 0;
  EXPECT_EQ(w->view.dtype, interleaved ? l.interleaved : l.type);
  EXPECT_EQ(w->view.rows, m);
  EXPECT_EQ(w->view.cols, k);
  std::vector<float> back(m * k), want_back(k);
  ASSERT_TRUE((*backend)->ReadF32(w->view, back.data()).ok());
  for (int64_t r = 0; r < m; ++r) {
    quant::DequantizeRow(l.type, q.data() + r * DTypeRowBytes(l.type, k), want_back.data(), k);
    ASSERT_EQ(std::memcmp(back.data() + r * k, want_back.data(), 4 * k), 0) << "row " << r;
  }
  const std::vector<float> x = RandomRows(n, k, 7, false);
  std::vector<float> out(n * m), alone(m);
  (*backend)->MatMul(Tensor::Make(const_cast<float*>(x.data()), DType::kF32, n, k), w->view,
                     Tensor::Make(out.data(), DType::kF32, n, m));
  const DType act = quant::VecDotType(l.type);
  const std::vector<uint8_t> a = ActivationRows(act, x, n, k);
  const size_t group_bytes = DTypeRowBytes(l.interleaved, k) * kGroupRows;
  for (int64_t r = 0; r < n; ++r) {
    (*backend)->MatMul(Tensor::Make(const_cast<float*>(x.data() + r * k), DType::kF32, 1, k),
                       w->view, Tensor::Make(alone.data(), DType::kF32, 1, m));
    for (int64_t c = 0; c < m; ++c) {
      ASSERT_EQ(Bits(out[r * m + c]), Bits(alone[c])) << "row " << r << " col " << c;
      if (!interleaved) continue;
      const float want =
          l.dot(static_cast<const uint8_t*>(w->view.data) + c / kGroupRows * group_bytes,
                static_cast<int>(c % kGroupRows), k, a.data() + r * DTypeRowBytes(act, k));
      ASSERT_EQ(Bits(out[r * m + c]), Bits(want)) << "row " << r << " col " << c;
    }
  }
}

TEST_P(Interleaved, BackendMatMulIsBatchInvariant) {
  const Layout& l = GetParam();
  for (int64_t n : {1, 2, 7, 8, 9, 16, 67}) CheckBackend(l, n, 64, 512, 2);
  CheckBackend(l, 130, 2048, 768, 2);
  CheckBackend(l, 5, 48, 256, 1);
  CheckBackend(l, 3, 40, 256, 2);  // not whole groups of sixteen: kept as the file type
}

INSTANTIATE_TEST_SUITE_P(Types, Interleaved, ::testing::ValuesIn(kLayouts),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::string(DTypeName(info.param.type));
                         });

}  // namespace
}  // namespace pagoda::kernels
