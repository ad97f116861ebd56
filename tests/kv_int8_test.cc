// The int8 KV cache (kernels/cpu/kv_int8.h): exact codes and scales on hand-made tokens,
// codes that depend on their token alone, round-trip error bounds on random keys with
// per-channel offsets, and paged attention over an int8 cache against a float64 reference on
// the unrounded inputs.
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
using cpu::StoreInt8;

KvCacheShape Shape(int32_t blocks, int32_t block_size, int32_t heads, int32_t dim) {
  return {.num_layers = 2,
          .num_blocks = blocks,
          .block_size = block_size,
          .num_kv_heads = heads,
          .head_dim = dim,
          .dtype = DType::kI8};
}

TEST(KvInt8Test, SizesCountCodesAndScales) {
  const KvCacheShape s = Shape(3, 16, 4, 8);
  // Per layer and block: K and V codes 2 * 16 * 32 bytes, K and V scales 2 * 16 * 4 floats.
  EXPECT_EQ(s.bytes_per_block(), 2u * (1024 + 512));
  EXPECT_EQ(s.total_bytes(), 3 * s.bytes_per_block());
  EXPECT_EQ(s.scale_plane_elems(), 3 * 16 * 4);
}

// K and V alike: codes rounded over each head's largest magnitude, one step per token and head.
TEST(KvInt8Test, CodesAreRoundedOverTheHeadsLargestMagnitude) {
  const KvCacheShape shape = Shape(1, 2, 2, 4);
  for (int32_t kind : {0, 1}) {
    std::vector<char> bytes(shape.total_bytes(), 0);
    const PagedKvCache c{bytes.data(), shape};
    // Head 0: max |x| = 127/8, step 1/8; head 1: all zero (step 0, codes 0).
    const float x[] = {127.f / 8, -64.f / 8, 0.f, 3.375f / 8, 0.f, 0.f, 0.f, 0.f};
    StoreInt8(x, c, 0, kind, 1);
    const auto* codes = static_cast<const int8_t*>(c.Plane(0, kind)) + 8;
    const int8_t want[] = {127, -64, 0, 3, 0, 0, 0, 0};
    for (int e = 0; e < 8; ++e) EXPECT_EQ(codes[e], want[e]) << e;
    EXPECT_EQ(c.Scales(0, kind)[2], 0.125f);
    EXPECT_EQ(c.Scales(0, kind)[3], 0.f);
    EXPECT_EQ(LoadInt8(c, 0, kind, 1, 0, 3), 0.375f);
    EXPECT_EQ(LoadInt8(c, 0, kind, 1, 1, 0), 0.f);
    EXPECT_EQ(c.Scales(0, 1 - kind)[2], 0.f);  // the other kind untouched
  }
}

// A token's stored form depends on that token alone: storing a block's tokens in any order,
// or storing other tokens around them, gives the same bytes (what batch invariance needs).
TEST(KvInt8Test, ATokensCodesDependOnItAlone) {
  const int32_t heads = 2, dim = 8, bs = 4, tokens = 8;
  const KvCacheShape shape = Shape(2, bs, heads, dim);
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.f, 3.f);
  std::vector<float> x(static_cast<size_t>(tokens) * heads * dim);
  for (float& v : x) v = noise(rng);
  std::vector<char> forward(shape.total_bytes(), 0), backward(shape.total_bytes(), 1);
  const PagedKvCache f{forward.data(), shape}, b{backward.data(), shape};
  for (int32_t t = 0; t < tokens; ++t) {
    StoreInt8(&x[t * heads * dim], f, 1, 0, t);
    StoreInt8(&x[t * heads * dim], f, 1, 1, t);
  }
  for (int32_t t = tokens - 1; t >= 0; --t) {
    StoreInt8(&x[t * heads * dim], b, 1, 1, t);
    StoreInt8(&x[t * heads * dim], b, 1, 0, t);
  }
  for (int32_t kind : {0, 1}) {
    for (int32_t t = 0; t < tokens; ++t) {
      for (int32_t h = 0; h < heads; ++h) {
        for (int32_t e = 0; e < dim; ++e) {
          EXPECT_EQ(LoadInt8(f, 1, kind, t, h, e), LoadInt8(b, 1, kind, t, h, e));
        }
      }
    }
  }
}

// Keys shaped like a model's (a large offset on some channels): every value read back is
// within half of its token's step, s = max|x| / 127 over its head.
TEST(KvInt8Test, RoundTripErrorIsWithinHalfAStep) {
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
  std::vector<char> bytes(shape.total_bytes(), 0);
  const PagedKvCache c{bytes.data(), shape};
  for (int32_t t = 0; t < tokens; ++t) {
    for (int32_t kind : {0, 1}) StoreInt8(&x[t * heads * dim], c, 0, kind, t);
  }
  for (int32_t t = 0; t < tokens; ++t) {
    for (int32_t h = 0; h < heads; ++h) {
      float amax = 0.f;
      for (int32_t e = 0; e < dim; ++e)
        amax = std::max(amax, std::fabs(x[(t * heads + h) * dim + e]));
      for (int32_t e = 0; e < dim; ++e) {
        const float want = x[(t * heads + h) * dim + e];
        for (int32_t kind : {0, 1}) {
          EXPECT_LE(std::fabs(LoadInt8(c, 0, kind, t, h, e) - want), amax / 254 * (1 + 1e-5))
              << t << " " << h << " " << e;
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
// change the stored K makes and v' the stored V; that bound itself stays under 0.08 (the keys'
// offset channel widens every key's step: one step per token and head).
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
      EXPECT_LT(tol, 0.08) << "head " << h;
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
