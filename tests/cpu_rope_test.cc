// The CPU backend's RoPE against a plain double-precision implementation of ggml's rope
// formulas (ggml-cpu rope_yarn / ggml_rope_yarn_corr_dims): adjacent and NEOX pairs,
// per-pair frequency factors, linear scaling and YaRN, at positions up to 8191 and head
// sizes 8 to 128, on fused-QKV column views; also the YaRN correction range and AddBias.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"

namespace pagoda::kernels {
namespace {

struct Case {
  std::string name;
  int32_t heads, kv_heads, head_dim, rope_dim;
  float base;
  bool neox = false;
  bool freq_factors = false;
  float freq_scale = 1.f;
  float ext_factor = 0.f;
  float attn_factor = 1.f;
  int32_t n_ctx_orig = 0;
};

// ggml's correction dimension, in double.
double CorrDim(int n_dims, int n_ctx_orig, double rotations, double base) {
  return n_dims * std::log(n_ctx_orig / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

// Rotates one head `v` (head_dim values) at `pos` the way ggml_rope_ext defines it.
void ReferenceHead(const Case& c, const std::vector<float>& factors, int32_t pos, double* v) {
  const int half = c.rope_dim / 2;
  const double low = std::max(0.0, std::floor(CorrDim(c.rope_dim, c.n_ctx_orig, 32, c.base)));
  const double high =
      std::min(c.rope_dim - 1.0, std::ceil(CorrDim(c.rope_dim, c.n_ctx_orig, 1, c.base)));
  for (int i = 0; i < half; ++i) {
    const double extrap =
        pos * std::pow(double{c.base}, -2.0 * i / c.rope_dim) / (c.freq_factors ? factors[i] : 1.0);
    const double interp = c.freq_scale * extrap;
    double angle = interp;
    double mscale = c.attn_factor;
    if (c.ext_factor != 0) {
      const double y = (i - low) / std::max(0.001, high - low);
      const double mix = (1 - std::clamp(y, 0.0, 1.0)) * c.ext_factor;
      angle = interp * (1 - mix) + extrap * mix;
      mscale *= 1 + 0.1 * std::log(1.0 / c.freq_scale);
    }
    const int a = c.neox ? i : 2 * i;
    const int b = c.neox ? i + half : 2 * i + 1;
    const double x0 = v[a], x1 = v[b];
    v[a] = (x0 * std::cos(angle) - x1 * std::sin(angle)) * mscale;
    v[b] = (x0 * std::sin(angle) + x1 * std::cos(angle)) * mscale;
  }
}

class CpuRopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = *CreateBackend({.device = DeviceKind::kCpu, .num_threads = 2});
  }

  // Runs `c` on a fused [q | k | v] buffer and checks every element against ReferenceHead.
  void Check(const Case& c) {
    SCOPED_TRACE(c.name);
    const std::vector<int32_t> positions = {0, 1, 5, 100, 1500, 4000, 8191};
    const int64_t n = static_cast<int64_t>(positions.size());
    BatchInput batch;
    batch.positions = positions;
    batch.token_ids.assign(n, 0);
    ASSERT_TRUE(backend_->PrepareBatch(batch).ok());
    const int64_t q_dim = int64_t{c.heads} * c.head_dim;
    const int64_t kv_dim = int64_t{c.kv_heads} * c.head_dim;
    const int64_t width = q_dim + 2 * kv_dim;
    std::uniform_real_distribution<float> value(-1.f, 1.f);
    std::vector<float> qkv(n * width);
    for (float& x : qkv) x = value(rng_);
    const std::vector<float> before = qkv;
    std::uniform_real_distribution<float> factor(1.f, 8.f);
    std::vector<float> factors(c.rope_dim / 2);
    for (float& f : factors) f = factor(rng_);

    const Tensor all = Tensor::Make(qkv.data(), DType::kF32, n, width);
    RopeParams p{.num_heads = c.heads,
                 .num_kv_heads = c.kv_heads,
                 .head_dim = c.head_dim,
                 .rope_dim = c.rope_dim,
                 .freq_base = c.base,
                 .neox = c.neox,
                 .freq_scale = c.freq_scale,
                 .ext_factor = c.ext_factor,
                 .attn_factor = c.attn_factor,
                 .n_ctx_orig = c.n_ctx_orig};
    if (c.freq_factors) {
      p.freq_factors = Tensor::Make(factors.data(), DType::kF32, 1, c.rope_dim / 2);
    }
    backend_->Rope(all.Cols(0, q_dim), all.Cols(q_dim, kv_dim), p);

    int64_t mismatches = 0;
    for (int64_t r = 0; r < n; ++r) {
      std::vector<double> want(before.begin() + r * width, before.begin() + (r + 1) * width);
      for (int32_t h = 0; h < c.heads + c.kv_heads; ++h) {
        ReferenceHead(c, factors, positions[r], want.data() + int64_t{h} * c.head_dim);
      }
      // float angles come from i successive roundings of pos * theta_scale (and theta_scale's
      // own rounding, raised to the power i): an angle error up to about
      // pos * 2 (i + 2) * 2^-24, plus the roundings of cos, sin and the rotation.
      const double scale = c.attn_factor * (c.ext_factor != 0 ? 1.3 : 1.0);
      for (int64_t col = 0; col < width; ++col) {
        const int64_t in_head = col < q_dim + kv_dim ? col % c.head_dim : c.rope_dim;
        const int64_t pair = in_head >= c.rope_dim ? 0
                             : c.neox              ? in_head % (c.rope_dim / 2)
                                                   : in_head / 2;
        const double tol = in_head >= c.rope_dim
                               ? 0.0  // v and the unrotated tail of each head stay bit-identical
                               : scale * 1.5 * (positions[r] * (pair + 2) * 1.2e-7 + 1e-6);
        const double got = qkv[r * width + col];
        if (std::abs(got - want[col]) > tol && ++mismatches <= 5) {
          ADD_FAILURE() << "row " << r << " (pos " << positions[r] << ") col " << col << ": got "
                        << got << ", want " << want[col] << " (tol " << tol << ")";
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
  }

  std::unique_ptr<Backend> backend_;
  std::mt19937 rng_{77};
};

TEST_F(CpuRopeTest, AdjacentPairs) {
  Check({.name = "llama head 8",
         .heads = 8,
         .kv_heads = 4,
         .head_dim = 8,
         .rope_dim = 8,
         .base = 10000.f});
  Check({.name = "llama head 128",
         .heads = 4,
         .kv_heads = 1,
         .head_dim = 128,
         .rope_dim = 128,
         .base = 500000.f});
  Check({.name = "partial rotation",
         .heads = 2,
         .kv_heads = 2,
         .head_dim = 64,
         .rope_dim = 32,
         .base = 10000.f});
}

TEST_F(CpuRopeTest, NeoxPairs) {
  Check({.name = "neox head 8",
         .heads = 8,
         .kv_heads = 4,
         .head_dim = 8,
         .rope_dim = 8,
         .base = 10000.f,
         .neox = true});
  Check({.name = "neox head 64",
         .heads = 4,
         .kv_heads = 2,
         .head_dim = 64,
         .rope_dim = 64,
         .base = 1000000.f,
         .neox = true});
  Check({.name = "neox partial",
         .heads = 2,
         .kv_heads = 1,
         .head_dim = 64,
         .rope_dim = 16,
         .base = 10000.f,
         .neox = true});
}

TEST_F(CpuRopeTest, FrequencyFactors) {
  Check({.name = "factors head 8",
         .heads = 8,
         .kv_heads = 4,
         .head_dim = 8,
         .rope_dim = 8,
         .base = 10000.f,
         .freq_factors = true});
  Check({.name = "factors head 128",
         .heads = 2,
         .kv_heads = 1,
         .head_dim = 128,
         .rope_dim = 128,
         .base = 500000.f,
         .freq_factors = true});
  Check({.name = "factors neox",
         .heads = 2,
         .kv_heads = 1,
         .head_dim = 64,
         .rope_dim = 64,
         .base = 10000.f,
         .neox = true,
         .freq_factors = true});
}

TEST_F(CpuRopeTest, LinearScaling) {
  Check({.name = "linear 4",
         .heads = 8,
         .kv_heads = 4,
         .head_dim = 8,
         .rope_dim = 8,
         .base = 10000.f,
         .freq_scale = 0.25f});
  Check({.name = "linear 2 neox attn 1.5",
         .heads = 4,
         .kv_heads = 2,
         .head_dim = 64,
         .rope_dim = 64,
         .base = 10000.f,
         .neox = true,
         .freq_scale = 0.5f,
         .attn_factor = 1.5f});
}

TEST_F(CpuRopeTest, Yarn) {
  Check({.name = "yarn 4 head 8",
         .heads = 8,
         .kv_heads = 4,
         .head_dim = 8,
         .rope_dim = 8,
         .base = 10000.f,
         .freq_scale = 0.25f,
         .ext_factor = 1.f,
         .n_ctx_orig = 128});
  Check({.name = "yarn 4 head 128",
         .heads = 2,
         .kv_heads = 1,
         .head_dim = 128,
         .rope_dim = 128,
         .base = 1000000.f,
         .freq_scale = 0.25f,
         .ext_factor = 1.f,
         .attn_factor = 0.8f,
         .n_ctx_orig = 32768});
  Check({.name = "yarn 8 neox factors",
         .heads = 2,
         .kv_heads = 2,
         .head_dim = 64,
         .rope_dim = 64,
         .base = 10000.f,
         .neox = true,
         .freq_factors = true,
         .freq_scale = 0.125f,
         .ext_factor = 0.5f,
         .n_ctx_orig = 4096});
}

// ggml_rope_yarn_corr_dims for Llama-2-like and Qwen2-like settings (values worked out by
// hand from its formula): floor/ceil of d * ln(n_ctx / (2 pi beta)) / (2 ln base), clamped
// to [0, d - 1].
TEST(RopeYarnCorrDimsTest, MatchesGgmlFormula) {
  RopeParams p{.rope_dim = 128, .freq_base = 10000.f, .n_ctx_orig = 4096};
  std::array<float, 2> d = RopeYarnCorrDims(p);
  // 128 * ln(4096 / (64 pi)) / (2 ln 10000) = 20.94..., 128 * ln(4096 / (2 pi)) / ... = 45.0...
  EXPECT_EQ(d[0], 20.f);
  EXPECT_EQ(d[1], 46.f);
  p = {.rope_dim = 8, .freq_base = 10000.f, .n_ctx_orig = 128};
  d = RopeYarnCorrDims(p);
  EXPECT_EQ(d[0], 0.f);  // negative before the clamp
  EXPECT_EQ(d[1], 2.f);
  p = {.rope_dim = 8, .freq_base = 100.f, .n_ctx_orig = 1 << 16};
  EXPECT_EQ(RopeYarnCorrDims(p)[1], 7.f);  // ceil(8.03) clamped to d - 1
}

TEST(CpuAddBiasTest, AddsTheRowToEveryRowOfAStridedView) {
  auto backend = *CreateBackend({.device = DeviceKind::kCpu, .num_threads = 2});
  std::vector<float> wide(4 * 6);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<float>(i);
  const std::vector<float> bias = {0.5f, -1.f, 2.f};
  backend->AddBias(Tensor::Make(wide.data(), DType::kF32, 4, 6).Cols(2, 3),
                   Tensor::Make(const_cast<float*>(bias.data()), DType::kF32, 1, 3));
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) {
      const float base = static_cast<float>(r * 6 + c);
      const float want = c >= 2 && c < 5 ? base + bias[c - 2] : base;
      EXPECT_EQ(wide[r * 6 + c], want) << r << "," << c;
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
