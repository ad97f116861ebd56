// The int8 KV cache (kernels/cpu/kv_int8.h): exact codes and parameters on hand-made blocks,
// round-trip error bounds on random keys with per-channel offsets, and paged attention over
// an int8 cache against a float64 reference on the unrounded inputs.
#include "kernels/cpu/kv_int8.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"

namespace pagoda::kernels {
namespace {

using cpu::LoadInt8;
using cpu::StoreKeysInt8;
using cpu::StoreValueInt8;

KvCacheShape Shape(int32_t blocks, int32_t block_size, int32_t heads, int32_t dim) {
  return {.num_layers = 2,
          .num_blocks = blocks,
          .block_size = block_size,
          .num_kv_heads = heads,
          .head_dim = dim,
          .dtype = DType::kI8};
}

const int8_t* KeyCodes(const PagedKvCache& c, int32_t layer, int64_t slot) {
  return static_cast<const int8_t*>(c.Plane(layer, 0)) + slot * c.shape.token_elems();
}

TEST(KvInt8Test, SizesCountCodesAndParameters) {
  const KvCacheShape s = Shape(3, 16, 4, 8);
  // Per layer and block: K and V codes 2 * 16 * 32 bytes, K parameters 4 * 2 * 8 floats,
  // V scales 16 * 4 floats.
  EXPECT_EQ(s.bytes_per_block(), 2u * (1024 + 256 + 256));
  EXPECT_EQ(s.total_bytes(), 3 * s.bytes_per_block());
  EXPECT_EQ(s.k_param_plane_elems(), 3 * 4 * 2 * 8);
  EXPECT_EQ(s.v_scale_plane_elems(), 3 * 16 * 4);
}

// Channel 0 takes 0, 255, 510 one token at a time: the range grows twice, re-rounding the
// earlier codes; channel 1 is constant (step 0). All values are exact in float.
TEST(KvInt8Test, KeyRangesGrowAndReRoundExactly) {
  const KvCacheShape shape = Shape(2, 4, 1, 2);
  std::vector<char> bytes(shape.total_bytes(), 0);
  const PagedKvCache c{bytes.data(), shape};
  const float* params = c.KParams(1);  // block 0: steps [2], offsets [2]
  const float t0[] = {0.f, 5.f}, t1[] = {255.f, 5.f}, t2[] = {510.f, 5.f};
  StoreKeysInt8(t0, 0, 1, c, 1, 0);
  EXPECT_EQ(params[0], 0.f);
  EXPECT_EQ(params[2], 0.f);
  EXPECT_EQ(LoadInt8(c, 1, 0, 0, 0, 0), 0.f);
  StoreKeysInt8(t1, 0, 1, c, 1, 1);
  EXPECT_EQ(params[0], 1.f);    // (255 - 0) / 255
  EXPECT_EQ(params[2], 128.f);  // 0 + 128 * 1
  EXPECT_EQ(KeyCodes(c, 1, 0)[0], -128);
  EXPECT_EQ(KeyCodes(c, 1, 1)[0], 127);
  StoreKeysInt8(t2, 0, 1, c, 1, 2);
  EXPECT_EQ(params[0], 2.f);
  EXPECT_EQ(params[2], 256.f);
  EXPECT_EQ(KeyCodes(c, 1, 0)[0], -128);
  EXPECT_EQ(KeyCodes(c, 1, 1)[0], 0);  // (255 - 256) / 2 = -0.5 rounds to even: 0
  EXPECT_EQ(KeyCodes(c, 1, 2)[0], 127);
  EXPECT_EQ(LoadInt8(c, 1, 0, 0, 0, 0), 0.f);
  EXPECT_EQ(LoadInt8(c, 1, 0, 1, 0, 0), 256.f);  // off by half the final step
  EXPECT_EQ(LoadInt8(c, 1, 0, 2, 0, 0), 510.f);
  for (int64_t slot = 0; slot < 3; ++slot) {
    EXPECT_EQ(KeyCodes(c, 1, slot)[1], 0);
    EXPECT_EQ(LoadInt8(c, 1, 0, slot, 0, 1), 5.f);
  }
  // The same three tokens in one call to block 1: one range, no re-rounding; block 0 and
  // layer 0 untouched.
  const float run[] = {0.f, 5.f, 255.f, 5.f, 510.f, 5.f};
  StoreKeysInt8(run, 2, 3, c, 1, 4);
  EXPECT_EQ(params[2 * 2], 2.f);
  EXPECT_EQ(KeyCodes(c, 1, 5)[0], 0);
  EXPECT_EQ(LoadInt8(c, 1, 0, 1, 0, 0), 256.f);
  EXPECT_EQ(c.KParams(0)[0], 0.f);
  // A new use of block 0 (offset 0 again) starts afresh.
  StoreKeysInt8(t1, 0, 1, c, 1, 0);
  EXPECT_EQ(params[0], 0.f);
  EXPECT_EQ(params[2], 255.f);
  EXPECT_EQ(LoadInt8(c, 1, 0, 0, 0, 0), 255.f);
}

TEST(KvInt8Test, ValueCodesAreRoundedOverTheHeadsLargestMagnitude) {
  const KvCacheShape shape = Shape(1, 2, 2, 4);
  std::vector<char> bytes(shape.total_bytes(), 0);
  const PagedKvCache c{bytes.data(), shape};
  // Head 0: max |x| = 127/8, step 1/8; head 1: all zero (step 0, codes 0).
  const float v[] = {127.f / 8, -64.f / 8, 0.f, 3.375f / 8, 0.f, 0.f, 0.f, 0.f};
  StoreValueInt8(v, c, 0, 1);
  const auto* codes = static_cast<const int8_t*>(c.Plane(0, 1)) + 8;
  const int8_t want[] = {127, -64, 0, 3, 0, 0, 0, 0};
  for (int e = 0; e < 8; ++e) EXPECT_EQ(codes[e], want[e]) << e;
  EXPECT_EQ(c.VScales(0)[2], 0.125f);
  EXPECT_EQ(c.VScales(0)[3], 0.f);
  EXPECT_EQ(LoadInt8(c, 0, 1, 1, 0, 3), 0.375f);
  EXPECT_EQ(LoadInt8(c, 0, 1, 1, 1, 0), 0.f);
}

// Keys shaped like a model's (a large offset on some channels): stored a token at a time
// (decode) or a block at a time (prefill); every value read back is within half of each step
// it was rounded with (prefill: the final step only), V within half its token's step.
TEST(KvInt8Test, RoundTripErrorIsWithinHalfOfEveryStepUsed) {
  const int32_t heads = 2, dim = 8, bs = 16, tokens = 40;
  const KvCacheShape shape = Shape(3, bs, heads, dim);
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(tokens) * heads * dim);
  for (int32_t t = 0; t < tokens; ++t) {
    for (int32_t i = 0; i < heads * dim; ++i) {
      x[t * heads * dim + i] =
          (i % dim >= 6 ? 12.f : 0.f) * (i < dim ? 1 : -1) + noise(rng) * (1 + i % 3);
    }
  }
  for (bool decode : {true, false}) {
    SCOPED_TRACE(decode ? "decode" : "prefill");
    std::vector<char> bytes(shape.total_bytes(), 0);
    const PagedKvCache c{bytes.data(), shape};
    // steps[t][h * dim + e]: K step of token t's block right after token t was stored.
    std::vector<std::vector<float>> steps;
    for (int32_t t = 0; t < tokens; t += decode ? 1 : bs) {
      const int32_t n = decode ? 1 : std::min(bs, tokens - t);
      StoreKeysInt8(&x[t * heads * dim], heads * dim, n, c, 0, t);
      for (int32_t i = 0; i < n; ++i) StoreValueInt8(&x[(t + i) * heads * dim], c, 0, t + i);
      for (int32_t i = 0; i < n; ++i) {
        const float* p = c.KParams(0) + (t / bs) * heads * 2 * dim;
        std::vector<float> s(heads * dim);
        for (int32_t h = 0; h < heads; ++h)
          for (int32_t e = 0; e < dim; ++e) s[h * dim + e] = p[h * 2 * dim + e];
        steps.push_back(s);
      }
    }
    for (int32_t t = 0; t < tokens; ++t) {
      const int32_t block_end = std::min(tokens, (t / bs + 1) * bs);
      for (int32_t h = 0; h < heads; ++h) {
        float amax = 0.f;
        for (int32_t e = 0; e < dim; ++e)
          amax = std::max(amax, std::fabs(x[(t * heads + h) * dim + e]));
        for (int32_t e = 0; e < dim; ++e) {
          const int32_t i = h * dim + e;
          const float want = x[t * heads * dim + i];
          double bound = steps[t][i] / 2;  // its own rounding, then each growth re-rounds it
          for (int32_t u = t + 1; u < block_end; ++u) {
            if (steps[u][i] != steps[u - 1][i]) bound += steps[u][i] / 2;
          }
          bound += 1e-5 * (std::fabs(want) + 1);  // float arithmetic of code * s + z
          EXPECT_LE(std::fabs(LoadInt8(c, 0, 0, t, h, e) - want), bound) << t << " " << i;
          EXPECT_LE(std::fabs(LoadInt8(c, 0, 1, t, h, e) - want), amax / 254 * (1 + 1e-5))
              << t << " " << i;
        }
      }
    }
  }
}

// Batch of tokens [first, last) of one sequence with block table `table`.
BatchInput SeqBatch(const std::vector<int32_t>& table, int32_t bs, int32_t first, int32_t last) {
  BatchInput b;
  for (int32_t t = first; t < last; ++t) {
    b.token_ids.push_back(0);
    b.positions.push_back(t);
    b.slot_mapping.push_back(table[t / bs] * bs + t % bs);
  }
  b.query_start_loc = {0, last - first};
  b.seq_lens = {last};
  b.block_tables = table;
  b.max_blocks_per_seq = static_cast<int32_t>(table.size());
  b.logits_indices = {last - first - 1};
  return b;
}

// A 70-token sequence (37 prefilled, the rest decoded one at a time) on an int8 cache: the
// last token's attention equals softmax(q K^T / sqrt(d)) V in float64 on the unrounded K and
// V within (e^{2 delta} - 1) max|v| + max|v' - v| + 1e-5, where delta is the largest score
// change the stored K makes and v' the stored V; that bound itself stays under 0.05.
TEST(KvInt8Test, AttentionMatchesFloat64OnUnroundedInputs) {
  auto backend = *CreateBackend({.device = DeviceKind::kCpu, .num_threads = 2});
  for (int32_t dim : {8, 64}) {
    SCOPED_TRACE(dim);
    const int32_t heads = 4, kv_heads = 2, bs = 16, ctx = 70, width = kv_heads * dim;
    const KvCacheShape shape = Shape(6, bs, kv_heads, dim);
    auto buffer = *backend->Allocate(shape.total_bytes());
    const PagedKvCache cache{buffer.data(), shape};
    const std::vector<int32_t> table = {2, 0, 5, 1, 3};
    std::mt19937 rng(dim);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> k(ctx * width), v(ctx * width), q(heads * dim);
    for (int32_t i = 0; i < ctx * width; ++i) k[i] = u(rng) + (i % dim == 1 ? 6.f : 0.f);
    for (float& x : v) x = u(rng);
    for (float& x : q) x = u(rng);
    const AttentionParams p{.num_heads = heads,
                            .num_kv_heads = kv_heads,
                            .head_dim = dim,
                            .scale = 1.f / std::sqrt(static_cast<float>(dim))};
    std::vector<float> out(q.size());
    for (int32_t first = 0; first < ctx;) {
      const int32_t last = first == 0 ? 37 : first + 1;
      const BatchInput b = SeqBatch(table, bs, first, last);
      ASSERT_TRUE(backend->PrepareBatch(b).ok());
      backend->WriteKv(Tensor::Make(&k[first * width], DType::kF32, last - first, width),
                       Tensor::Make(&v[first * width], DType::kF32, last - first, width), cache, 1);
      if (last == ctx) {
        backend->Attention(Tensor::Make(q.data(), DType::kF32, 1, heads * dim), cache, 1, p,
                           Tensor::Make(out.data(), DType::kF32, 1, heads * dim));
      }
      first = last;
    }
    for (int32_t h = 0; h < heads; ++h) {
      const int32_t g = h / (heads / kv_heads);
      std::vector<double> sc(ctx);
      double delta = 0, v_err = 0, v_max = 0;
      for (int32_t t = 0; t < ctx; ++t) {
        const int64_t slot = int64_t{table[t / bs]} * bs + t % bs;
        double d = 0, d_stored = 0;
        for (int32_t e = 0; e < dim; ++e) {
          const double x = k[t * width + g * dim + e];
          d += q[h * dim + e] * x;
          d_stored += q[h * dim + e] * double{LoadInt8(cache, 1, 0, slot, g, e)};
          const double y = v[t * width + g * dim + e];
          v_err = std::max(v_err, std::fabs(LoadInt8(cache, 1, 1, slot, g, e) - y));
          v_max = std::max(v_max, std::fabs(y));
        }
        sc[t] = d * p.scale;
        delta = std::max(delta, std::fabs(d_stored - d) * p.scale);
      }
      const double m = *std::max_element(sc.begin(), sc.end());
      double z = 0;
      for (double& x : sc) z += (x = std::exp(x - m));
      const double tol = std::expm1(2 * delta) * v_max + v_err + 1e-5;
      EXPECT_LT(tol, 0.05) << "head " << h;
      for (int32_t e = 0; e < dim; ++e) {
        double want = 0;
        for (int32_t t = 0; t < ctx; ++t) want += sc[t] / z * v[t * width + g * dim + e];
        EXPECT_NEAR(out[h * dim + e], want, tol) << "head " << h << " element " << e;
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
