// The batched quantized dot products (kernels/quant/vec_dot_rows.h) keep the single-row
// bits: the AVX2 and AVX-512 multi-row kernels (each forced) equal VecDotPortable for every row
// count, block count and weight type they cover, on random and on extreme inputs; VecDotRows equals
// VecDot for every weight type (whatever path it takes); and the CPU backend's MatMul, which tiles
// rows through them, gives every output element VecDot's bits at every batch shape and thread count
// (so a request's tokens do not depend on what runs beside it).
#include "kernels/quant/vec_dot_rows.h"

#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu_isa.h"
#include "kernels/quant/activation_quant.h"
#include "kernels/quant/quantize.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/quant/vec_dot_avx2.h"
#include "tests/quant_test_util.h"

namespace pagoda::kernels {
namespace {

const DType kRowTypes[] = {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
const DType kAllTypes[] = {DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                           DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K,
                           DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

using testing::Bits;
using testing::RandomRows;

// `cols` quantized weight rows and `rows` activation rows of VecDotType(type).
struct Operands {
  std::vector<uint8_t> w;
  size_t w_row = 0;
  int64_t cols = 1;
  std::vector<uint8_t> act;
  size_t act_row = 0;
  std::vector<float> scales;  // Q8_0 activations: every block's scale widened
  int64_t scale_row = 0;
  std::vector<float> block_d;  // Q8_K activations: block scales side by side
  std::vector<int8_t> qs_storage;
  const int8_t* qs = nullptr;  // the quants packed (PackQuants), 64-byte aligned

  // With `wide`, the caller's side data of the activation type (Q8_0 or Q8_K); with `packed`
  // too, its packed quants.
  quant::ActRows Rows(int rows, bool wide, bool packed = false) const {
    return {.data = act.data(),
            .stride = act_row,
            .rows = rows,
            .scales = wide && !scales.empty() ? scales.data() : nullptr,
            .scale_stride = static_cast<size_t>(scale_row),
            .block_d = wide && !block_d.empty() ? block_d.data() : nullptr,
            .qs = wide && packed ? qs : nullptr};
  }
  bool has_side_data() const { return !block_d.empty(); }
  quant::WeightRows Weights() const { return {.data = w.data(), .stride = w_row, .rows = cols}; }
  const uint8_t* weight(int64_t c) const { return w.data() + c * w_row; }
  const uint8_t* act_row_data(int r) const { return act.data() + r * act_row; }
};

Operands Make(DType type, int64_t k, int rows, uint32_t seed, bool extreme, int64_t cols = 1) {
  Operands o;
  o.cols = cols;
  o.w_row = DTypeRowBytes(type, k);
  const std::vector<float> wf = RandomRows(cols, k, seed, extreme);
  o.w.resize(o.w_row * cols);
  for (int64_t c = 0; c < cols; ++c) {
    quant::QuantizeRow(type, wf.data() + c * k, o.w.data() + c * o.w_row, k);
  }
  const DType act = quant::VecDotType(type);
  o.act_row = DTypeRowBytes(act, k);
  o.act.resize(o.act_row * rows);
  const std::vector<float> xf = RandomRows(rows, k, seed + 7, extreme);
  for (int r = 0; r < rows; ++r) {
    quant::QuantizeActivations(act, xf.data() + r * k, o.act.data() + r * o.act_row, k);
  }
  if (act == DType::kQ8_0) {
    o.scale_row = k / 32;
    o.scales.resize(o.scale_row * rows);
    for (int r = 0; r < rows; ++r) {
      quant::WidenScales(o.act.data() + r * o.act_row, k, o.scales.data() + r * o.scale_row);
    }
  }
  if (act == DType::kQ8_K || act == DType::kQ8_0) {
    o.block_d.resize(k / DTypeBlockElems(act) * quant::kVecDotRows);
    quant::TransposeBlockScales(act, o.act.data(), o.act_row, rows, k, o.block_d.data());
    o.qs_storage.resize(quant::PackedQuantsBytes(act, k) + 64);
    const auto at = reinterpret_cast<uintptr_t>(o.qs_storage.data());
    o.qs = o.qs_storage.data() + ((64 - at % 64) % 64);
    quant::PackQuants(act, o.act.data(), o.act_row, rows, k, const_cast<int8_t*>(o.qs));
  }
  return o;
}

using RowsKernel = bool (*)(DType, int64_t, const quant::WeightRows&, const quant::ActRows&, float*,
                            int64_t);

// `kernel` equals VecDotPortable bit for bit for every covered type, K, activation row count,
// weight row count (1 to 3) and input kind, writing only its outputs' slots.
void CheckKernel(RowsKernel kernel, std::vector<DType> types) {
  int checked = 0;
  for (DType type : types) {
    for (int64_t k : {256, 512, 768, 2048, 4096}) {
      for (int rows = 1; rows <= quant::kVecDotRows; ++rows) {
        for (int kind = 0; kind < 6; ++kind) {
          const bool extreme = kind % 2 == 1;
          const bool wide = kind >= 2;    // the activations' side data (ActRows)
          const bool packed = kind >= 4;  // and their packed quants
          const uint32_t seed = static_cast<uint32_t>(k * 10 + rows + (extreme ? 5000 : 0));
          const int64_t cols = 1 + (rows + kind) % 3;
          const Operands o = Make(type, k, rows, seed, extreme, cols);
          if (wide && !o.has_side_data()) continue;
          // out_stride cols + 1: each row's last slot stays untouched.
          const int64_t os = cols + 1;
          std::vector<float> got(os * rows, -1.f);
          ASSERT_TRUE(kernel(type, k, o.Weights(), o.Rows(rows, wide, packed), got.data(), os));
          for (int r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols; ++c) {
              const float want = quant::VecDotPortable(type, k, o.weight(c), o.act_row_data(r));
              EXPECT_EQ(Bits(got[r * os + c]), Bits(want))
                  << DTypeName(type) << " k=" << k << " rows=" << rows << " row " << r
                  << " weight row " << c << (extreme ? " extreme" : "") << (wide ? " wide" : "")
                  << (packed ? " packed" : "") << ": " << got[r * os + c] << " vs " << want;
            }
            EXPECT_EQ(got[r * os + cols], -1.f);
            ++checked;
          }
        }
      }
    }
  }
  int wide_types = 0;
  for (DType type : types) {
    const DType act = quant::VecDotType(type);
    wide_types += act == DType::kQ8_0 || act == DType::kQ8_K;
  }
  constexpr int kRowsChecked = quant::kVecDotRows * (quant::kVecDotRows + 1) / 2;
  EXPECT_EQ(checked, (static_cast<int>(types.size()) + 2 * wide_types) * 5 * kRowsChecked * 2);
  // The types the kernels leave to VecDot: nothing written.
  const Operands o = Make(DType::kQ4_1, 256, 1, 1, false);
  float out = -1.f;
  EXPECT_FALSE(kernel(DType::kQ4_1, 256, o.Weights(), o.Rows(1, false), &out, 1));
  EXPECT_EQ(out, -1.f);
}

TEST(VecDotRows, Avx2KernelsEqualPortableBitForBit) {
  if (!CpuRuns(CpuIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  CheckKernel(&quant::VecDotRowsAvx2, {std::begin(kRowTypes), std::end(kRowTypes)});
}

TEST(VecDotRows, Avx512KernelsEqualPortableBitForBit) {
  if (!CpuRuns(CpuIsa::kAvx512)) GTEST_SKIP() << "this CPU has no AVX-512 F/BW/VL";
  CheckKernel(&quant::VecDotRowsAvx512,
              {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K});
}

TEST(VecDotRows, Avx512VnniKernelsEqualPortableBitForBit) {
  if (!CpuRuns(CpuIsa::kAvx512Vnni)) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  CheckKernel(&quant::VecDotRowsAvx512Vnni,
              {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K});
}

TEST(VecDotRows, EveryTypeEqualsVecDot) {
  for (DType type : kAllTypes) {
    const int64_t k = 512;
    for (int rows = 1; rows <= quant::kVecDotRows; ++rows) {
      const int64_t cols = 1 + rows % 2;
      const Operands o = Make(type, k, rows, static_cast<uint32_t>(rows * 31), false, cols);
      for (int side = 0; side < 3; ++side) {
        const bool wide = side >= 1;
        if (wide && !o.has_side_data()) continue;
        std::vector<float> got(rows * cols);
        quant::VecDotRows(type, k, o.Weights(), o.Rows(rows, wide, side == 2), got.data(), cols);
        for (int r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            const float want = quant::VecDot(type, k, o.weight(c), o.act_row_data(r));
            EXPECT_EQ(Bits(got[r * cols + c]), Bits(want))
                << DTypeName(type) << " rows=" << rows << " r=" << r << " c=" << c
                << (wide ? " wide" : "");
          }
        }
      }
    }
  }
}

// x [n, k] times w [m, k]^T through the backend equals VecDot per element, bit for bit.
void CheckMatMulBits(DType type, int64_t n, int64_t m, int64_t k, int threads) {
  SCOPED_TRACE(std::string(DTypeName(type)) + " n=" + std::to_string(n) +
               " m=" + std::to_string(m) + " k=" + std::to_string(k) +
               " threads=" + std::to_string(threads));
  auto backend = CreateBackend({.device = DeviceKind::kCpu, .num_threads = threads});
  ASSERT_TRUE(backend.ok()) << backend.status();
  const std::vector<float> wf = RandomRows(m, k, 11, false);
  std::vector<uint8_t> wq(DTypeRowBytes(type, k) * m);
  for (int64_t c = 0; c < m; ++c) {
    quant::QuantizeRow(type, wf.data() + c * k, wq.data() + c * DTypeRowBytes(type, k), k);
  }
  auto w = (*backend)->CreateWeightRaw(type, wq.data(), m, k);
  ASSERT_TRUE(w.ok()) << w.status();
  const std::vector<float> x = RandomRows(n, k, 12, false);
  std::vector<float> out(n * m);
  (*backend)->MatMul(Tensor::Make(const_cast<float*>(x.data()), DType::kF32, n, k), w->view,
                     Tensor::Make(out.data(), DType::kF32, n, m));
  const DType act = quant::VecDotType(type);
  std::vector<uint8_t> a(DTypeRowBytes(act, k));
  for (int64_t r = 0; r < n; ++r) {
    quant::QuantizeActivations(act, x.data() + r * k, a.data(), k);
    for (int64_t c = 0; c < m; ++c) {
      const float want = quant::VecDot(type, k, wq.data() + c * DTypeRowBytes(type, k), a.data());
      ASSERT_EQ(Bits(out[r * m + c]), Bits(want)) << "row " << r << " col " << c;
    }
  }
}

// At every instruction-set level this CPU runs (each level's kernels, the layouts its
// backend loads weights in).
class MatMulAtLevel : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(MatMulAtLevel, KeepsSingleRowBitsAtEveryBatchShape) {
  ScopedCpuIsaCap cap(GetParam());
  if (!cap.ok()) GTEST_SKIP() << "this CPU does not run " << CpuIsaName(GetParam());
  for (DType type : kRowTypes) {
    for (int64_t n : {1, 3, 4, 5, 16, 67, 130}) CheckMatMulBits(type, n, 37, 512, 2);
  }
  CheckMatMulBits(DType::kQ4_K, 16, 300, 768, 1);
  CheckMatMulBits(DType::kQ6_K, 9, 50, 2048, 3);
}

INSTANTIATE_TEST_SUITE_P(VecDotRows, MatMulAtLevel,
                         ::testing::Values(CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512,
                                           CpuIsa::kAvx512Vnni),
                         [](const auto& info) { return std::string(CpuIsaName(info.param)); });

}  // namespace
}  // namespace pagoda::kernels
