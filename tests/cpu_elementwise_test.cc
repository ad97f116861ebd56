// cpu::SiluMulRow against a float64 reference, over lengths with and without a SIMD tail.
#include "kernels/cpu/cpu_elementwise.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pagoda::kernels::cpu {
namespace {

TEST(CpuElementwiseTest, SiluMulMatchesFloat64WithinAFewUlp) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-30.f, 30.f);
  for (int n : {1, 5, 16, 17, 64, 100, 2048}) {
    std::vector<float> gate(n), up(n), out(n);
    for (int i = 0; i < n; ++i) {
      gate[i] = dist(rng);
      up[i] = dist(rng) / 10.f;
    }
    gate[0] = 0.f;  // silu(0) = 0 exactly
    SiluMulRow(gate.data(), up.data(), out.data(), n);
    for (int i = 0; i < n; ++i) {
      const double g = gate[i];
      const double expected = g / (1.0 + std::exp(-g)) * up[i];
      EXPECT_NEAR(out[i], expected, 4e-7 * std::abs(expected) + 1e-30) << "n " << n << " i " << i;
    }
    EXPECT_EQ(out[0], 0.f);
  }
}

TEST(CpuElementwiseTest, SiluMulInPlace) {
  std::vector<float> gate = {1.f, -2.f, 3.f, 0.5f}, up = {2.f, 2.f, 2.f, 2.f};
  std::vector<float> expected(4);
  SiluMulRow(gate.data(), up.data(), expected.data(), 4);
  SiluMulRow(gate.data(), up.data(), gate.data(), 4);
  EXPECT_EQ(gate, expected);
}

}  // namespace
}  // namespace pagoda::kernels::cpu
