// The fp32 dot-product matmul kernels (kernels/cpu/cpu_f32_matmul*) against float64
// arithmetic: every tile shape and k tail, strided views, column ranges that leave the other
// columns untouched, and the CPU backend's MatMul at decode shapes.
#include "kernels/cpu/cpu_f32_matmul.h"

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_f32_matmul_impl.h"
#include "kernels/cpu_isa.h"

namespace pagoda::kernels::cpu {
namespace {

using DotFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t,
                       int64_t, int64_t, bool);

std::vector<float> Random(int64_t n, std::mt19937* rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& f : v) f = d(*rng);
  return v;
}

// Checks out[i, j] against the float64 dot product: fp32 summation in any order is within
// 1e-5 of sum |x * w| plus 1e-30.
void ExpectProduct(const float* x, int64_t xs, const float* w, int64_t ws, const float* out,
                   int64_t os, int64_t n, int64_t m, int64_t k, const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        ref += double{x[i * xs + p]} * w[j * ws + p];
        mag += std::fabs(double{x[i * xs + p]} * w[j * ws + p]);
      }
      ASSERT_NEAR(out[i * os + j], ref, 1e-5 * mag + 1e-30) << what << " at " << i << "," << j;
    }
  }
}

void CheckKernel(DotFn fn, const char* name) {
  std::mt19937 rng(7);
  for (int64_t n : {1, 2, 3, 4, 5, 7, 9, 13}) {
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 11, 13, 64}) {
      for (int64_t k : {1, 7, 8, 15, 16, 17, 33, 100, 768}) {
        // Strided views: every row has 3 spare elements after its k.
        const int64_t xs = k + 3, ws = k + 3, os = m + 2;
        const auto x = Random(n * xs, &rng), w = Random(m * ws, &rng);
        std::vector<float> out(n * os, 12345.f);
        fn(x.data(), xs, w.data(), ws, out.data(), os, n, m, k, false);
        ExpectProduct(x.data(), xs, w.data(), ws, out.data(), os, n, m, k,
                      std::string(name) + " n=" + std::to_string(n) + " m=" + std::to_string(m) +
                          " k=" + std::to_string(k));
        // accumulate adds the product to what out holds: out = 2 * x * w^T.
        fn(x.data(), xs, w.data(), ws, out.data(), os, n, m, k, true);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < m; ++j) out[i * os + j] /= 2;
        }
        ExpectProduct(x.data(), xs, w.data(), ws, out.data(), os, n, m, k,
                      std::string(name) + " accumulate k=" + std::to_string(k));
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_EQ(out[i * os + m], 12345.f);
          EXPECT_EQ(out[i * os + m + 1], 12345.f);
        }
      }
    }
  }
}

TEST(CpuF32MatMulTest, Avx512KernelMatchesFloat64) {
  if (!CpuRuns(CpuIsa::kAvx512)) GTEST_SKIP() << "no AVX-512F on this machine";
  CheckKernel(&F32DotAvx512, "avx512");
}

TEST(CpuF32MatMulTest, Avx2KernelMatchesFloat64) {
  if (!CpuRuns(CpuIsa::kAvx2)) {
    GTEST_SKIP() << "no AVX2+FMA on this machine";
  }
  CheckKernel(&F32DotAvx2, "avx2");
}

TEST(CpuF32MatMulTest, ColumnRangeWritesOnlyItsColumns) {
  if (!HasF32DotKernel()) GTEST_SKIP() << "no SIMD kernel on this machine";
  std::mt19937 rng(3);
  const int64_t n = 5, m = 20, k = 40;
  auto x = Random(n * k, &rng), w = Random(m * k, &rng);
  std::vector<float> out(n * m, -7.f);
  F32MatMulColumns(Tensor::Make(x.data(), DType::kF32, n, k),
                   Tensor::Make(w.data(), DType::kF32, m, k),
                   Tensor::Make(out.data(), DType::kF32, n, m), 6, 17);
  ExpectProduct(x.data(), k, w.data() + 6 * k, k, out.data() + 6, m, n, 11, k, "range");
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      if (j < 6 || j >= 17) {
        EXPECT_EQ(out[i * m + j], -7.f) << i << "," << j;
      }
    }
  }
  EXPECT_STRNE(F32DotKernelName(), "none");
}

// The backend at decode and prefill shapes, two threads (columns split across the pool).
TEST(CpuF32MatMulTest, BackendMatMulMatchesFloat64) {
  auto be = CreateCpuBackend({.num_threads = 2});
  ASSERT_TRUE(be.ok()) << be.status();
  std::mt19937 rng(11);
  // k > 1024 goes in depth slices (2061: four slices, the last with a tail); n = 300 at that
  // depth is two row blocks.
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 768},
                      {3, 768},
                      {16, 768},
                      {64, 768},
                      {65, 768},
                      {128, 768},
                      {1, 2061},
                      {64, 2061},
                      {300, 2061}}) {
    const int64_t m = 700;
    auto x = Random(n * k, &rng), w = Random(m * k, &rng);
    auto wt = (*be)->CreateWeight(w.data(), m, k);
    ASSERT_TRUE(wt.ok()) << wt.status();
    std::vector<float> out(n * m);
    (*be)->MatMul(Tensor::Make(x.data(), DType::kF32, n, k), wt->view,
                  Tensor::Make(out.data(), DType::kF32, n, m));
    ExpectProduct(x.data(), k, w.data(), k, out.data(), m, n, m, k,
                  "backend n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
}

}  // namespace
}  // namespace pagoda::kernels::cpu
