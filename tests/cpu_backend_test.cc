// CPU backend operators against plain reference arithmetic: K/V written through the slot
// mapping are read back through the block table, and paged attention over shuffled blocks
// equals attention over a contiguous copy, for prefill, decode and mixed batches.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "kernels/backend.h"
#include "kernels/cpu/kv_int8.h"
#include "kernels/quant/half.h"

namespace pagoda::kernels {
namespace {

struct Seq {
  int32_t context;  // tokens after this step
  int32_t new_tokens;
};

// Builds a batch over `seqs` whose blocks are a random permutation of the pool.
BatchInput MakeBatch(const std::vector<Seq>& seqs, int32_t block_size, int32_t num_blocks,
                     std::mt19937* rng, std::vector<std::vector<int32_t>>* tables) {
  std::vector<int32_t> free(num_blocks);
  std::iota(free.begin(), free.end(), 0);
  std::shuffle(free.begin(), free.end(), *rng);
  BatchInput b;
  int32_t max_blocks = 0;
  for (const Seq& s : seqs)
    max_blocks = std::max(max_blocks, (s.context + block_size - 1) / block_size);
  b.max_blocks_per_seq = max_blocks;
  b.query_start_loc.push_back(0);
  for (const Seq& s : seqs) {
    std::vector<int32_t> table;
    for (int32_t i = 0; i < (s.context + block_size - 1) / block_size; ++i) {
      table.push_back(free.back());
      free.pop_back();
    }
    for (int32_t t = s.context - s.new_tokens; t < s.context; ++t) {
      b.token_ids.push_back(0);
      b.positions.push_back(t);
      b.slot_mapping.push_back(table[t / block_size] * block_size + t % block_size);
    }
    b.query_start_loc.push_back(b.num_tokens());
    b.seq_lens.push_back(s.context);
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
    b.block_tables.resize(b.block_tables.size() + (max_blocks - table.size()), 0);
    b.logits_indices.push_back(b.num_tokens() - 1);
    tables->push_back(table);
  }
  return b;
}

std::vector<float> Random(size_t n, std::mt19937* rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(*rng);
  return v;
}

class CpuBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = *CreateBackend({.device = DeviceKind::kCpu, .num_threads = 2});
  }
  std::unique_ptr<Backend> backend_;
};

TEST_F(CpuBackendTest, KvWrittenThroughSlotMappingIsReadBackThroughBlockTable) {
  std::mt19937 rng(1);
  const KvCacheShape shape{.num_layers = 2,
                           .num_blocks = 16,
                           .block_size = 4,
                           .num_kv_heads = 2,
                           .head_dim = 8,
                           .dtype = DType::kF32};
  auto buffer = *backend_->Allocate(shape.total_bytes());
  const PagedKvCache cache{buffer.data(), shape};
  std::vector<std::vector<int32_t>> tables;
  // Contexts straddling block boundaries: 3, 4, 5 and 9 tokens, all written this step.
  const BatchInput batch = MakeBatch({{3, 3}, {4, 4}, {5, 5}, {9, 9}}, 4, 16, &rng, &tables);
  const int64_t width = shape.token_elems();
  std::vector<float> k = Random(batch.num_tokens() * width, &rng);
  std::vector<float> v = Random(batch.num_tokens() * width, &rng);
  ASSERT_TRUE(backend_->PrepareBatch(batch).ok());
  backend_->WriteKv(Tensor::Make(k.data(), DType::kF32, batch.num_tokens(), width),
                    Tensor::Make(v.data(), DType::kF32, batch.num_tokens(), width), cache, 1);
  int32_t row = 0;
  for (size_t s = 0; s < tables.size(); ++s) {
    for (int32_t t = 0; t < batch.seq_lens[s]; ++t, ++row) {
      const int64_t slot = int64_t{tables[s][t / 4]} * 4 + t % 4;
      const float* kc = static_cast<float*>(cache.Plane(1, 0)) + slot * width;
      const float* vc = static_cast<float*>(cache.Plane(1, 1)) + slot * width;
      for (int64_t e = 0; e < width; ++e) {
        ASSERT_EQ(kc[e], k[row * width + e]) << "seq " << s << " token " << t;
        ASSERT_EQ(vc[e], v[row * width + e]) << "seq " << s << " token " << t;
      }
    }
  }
}

// WriteKv rounds to f16 and bf16 exactly as quant::FloatToHalf / FloatToBf16 do (the SIMD
// conversion of each instruction set, the scalar tail alike): ties to even, subnormals,
// overflow, infinities and NaNs.
TEST_F(CpuBackendTest, WriteKvRoundsF16AndBf16AsTheScalarConverters) {
  constexpr int32_t kKvHeads = 2, kDim = 37;  // 74 values a token: vectors and a tail
  constexpr int32_t kTokens = 96;
  std::mt19937 rng(11);
  std::vector<float> x;
  std::uniform_int_distribution<uint32_t> bits;
  for (int32_t i = 0; i < kTokens * kKvHeads * kDim; ++i) {
    switch (i % 6) {
      case 0:  // any finite or not
        x.push_back(std::bit_cast<float>(bits(rng)));
        break;
      case 1:  // f16 ties and near-ties: 13 low bits 0x1000 +- 1
        x.push_back(std::bit_cast<float>((bits(rng) & ~0x1FFFu) | (0x0FFFu + (i / 6) % 3)));
        break;
      case 2:  // bf16 ties and near-ties
        x.push_back(std::bit_cast<float>((bits(rng) & ~0xFFFFu) | (0x7FFFu + (i / 6) % 3)));
        break;
      case 3:  // f16's subnormal and overflow ranges
        x.push_back(std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), i % 48 - 28));
        break;
      case 4: {
        const float special[] = {0.f,     -0.f,     INFINITY, -INFINITY, NAN,   65520.f,
                                 65519.f, -65504.f, 5.96e-8f, 2.98e-8f,  1e-45f};
        x.push_back(special[(i / 6) % 11]);
        break;
      }
      default:
        x.push_back(std::uniform_real_distribution<float>(-4, 4)(rng));
    }
  }
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const KvCacheShape shape{.num_layers = 1,
                             .num_blocks = kTokens / 16,
                             .block_size = 16,
                             .num_kv_heads = kKvHeads,
                             .head_dim = kDim,
                             .dtype = dtype};
    auto buffer = *backend_->Allocate(shape.total_bytes());
    const PagedKvCache cache{buffer.data(), shape};
    BatchInput b;
    b.query_start_loc = {0, kTokens};
    b.max_blocks_per_seq = kTokens / 16;
    for (int32_t t = 0; t < kTokens; ++t) {
      b.token_ids.push_back(0);
      b.positions.push_back(t);
      b.slot_mapping.push_back(t);
    }
    for (int32_t blk = 0; blk < kTokens / 16; ++blk) b.block_tables.push_back(blk);
    b.seq_lens = {kTokens};
    b.logits_indices = {kTokens - 1};
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " " << hwy::TargetName(target));
      hwy::SetSupportedTargetsForTest(target);
      ASSERT_TRUE(backend_->PrepareBatch(b).ok());
      backend_->WriteKv(Tensor::Make(x.data(), DType::kF32, kTokens, kKvHeads * kDim),
                        Tensor::Make(x.data(), DType::kF32, kTokens, kKvHeads * kDim), cache, 0);
      for (int32_t plane = 0; plane < 2; ++plane) {
        const auto* got = static_cast<const uint16_t*>(cache.Plane(0, plane));
        for (size_t i = 0; i < x.size(); ++i) {
          const uint16_t want =
              dtype == DType::kF16 ? quant::FloatToHalf(x[i]) : quant::FloatToBf16(x[i]);
          ASSERT_EQ(got[i], want) << "value " << i << " bits " << std::hex
                                  << std::bit_cast<uint32_t>(x[i]);
        }
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

// Reference attention over contiguous per-sequence K/V in double precision.
std::vector<float> ReferenceAttention(const BatchInput& b, const std::vector<float>& q,
                                      const std::vector<std::vector<float>>& keys,
                                      const std::vector<std::vector<float>>& values,
                                      const AttentionParams& p) {
  const int32_t kv_width = p.num_kv_heads * p.head_dim;
  const int32_t q_width = p.num_heads * p.head_dim;
  std::vector<float> out(static_cast<size_t>(b.num_tokens()) * q_width);
  for (int32_t s = 0; s < b.num_seqs(); ++s) {
    for (int32_t i = b.query_start_loc[s]; i < b.query_start_loc[s + 1]; ++i) {
      for (int32_t h = 0; h < p.num_heads; ++h) {
        const int32_t g = h / (p.num_heads / p.num_kv_heads);
        std::vector<double> sc(b.positions[i] + 1);
        for (int32_t t = 0; t <= b.positions[i]; ++t) {
          double d = 0;
          for (int32_t e = 0; e < p.head_dim; ++e) {
            d += double{q[i * q_width + h * p.head_dim + e]} *
                 keys[s][t * kv_width + g * p.head_dim + e];
          }
          sc[t] = d * p.scale;
        }
        const double m = *std::max_element(sc.begin(), sc.end());
        double z = 0;
        for (double& x : sc) z += (x = std::exp(x - m));
        for (int32_t e = 0; e < p.head_dim; ++e) {
          double acc = 0;
          for (int32_t t = 0; t <= b.positions[i]; ++t) {
            acc += sc[t] / z * values[s][t * kv_width + g * p.head_dim + e];
          }
          out[i * q_width + h * p.head_dim + e] = static_cast<float>(acc);
        }
      }
    }
  }
  return out;
}

// Rounds one token's vectors (all KV heads) as a cache of `dtype` stores them and returns
// the values attention must see; writes the stored form at `slot` of plane (layer 0, kind).
// int8 goes through kernels/cpu/kv_int8.h and returns x: the test reads what attention sees
// back at the end (ReadBackInt8).
std::vector<float> StoreAsCached(const float* x, const PagedKvCache& cache, int32_t kind,
                                 int64_t slot) {
  const KvCacheShape& s = cache.shape;
  if (s.dtype == DType::kI8) {
    kernels::cpu::StoreInt8(x, cache, 0, kind, slot);
    return std::vector<float>(x, x + s.token_elems());
  }
  const int64_t width = s.token_elems();
  std::vector<float> seen(x, x + width);
  char* dst = static_cast<char*>(cache.Plane(0, kind)) + slot * width * DTypeSize(s.dtype);
  for (int32_t h = 0; h < s.num_kv_heads; ++h) {
    float amax = 0.f;
    for (int32_t e = 0; e < s.head_dim; ++e)
      amax = std::max(amax, std::fabs(x[h * s.head_dim + e]));
    const float scale = amax / 127.f;
    for (int32_t e = 0; e < s.head_dim; ++e) {
      const int64_t i = int64_t{h} * s.head_dim + e;
      if (s.dtype == DType::kF32) {
        reinterpret_cast<float*>(dst)[i] = x[i];
      } else if (s.dtype == DType::kF16) {
        reinterpret_cast<uint16_t*>(dst)[i] = quant::FloatToHalf(x[i]);
        seen[i] = quant::HalfToFloat(quant::FloatToHalf(x[i]));
      } else if (s.dtype == DType::kBF16) {
        reinterpret_cast<uint16_t*>(dst)[i] = quant::FloatToBf16(x[i]);
        seen[i] = quant::Bf16ToFloat(quant::FloatToBf16(x[i]));
      } else {
        const float inv = scale > 0.f ? 1.f / scale : 0.f;
        const float q = std::clamp(std::nearbyint(x[i] * inv), -127.f, 127.f);
        reinterpret_cast<int8_t*>(dst)[i] = static_cast<int8_t>(q);
        seen[i] = q * scale;
      }
    }
  }
  return seen;
}

void CheckAttention(Backend* backend, const std::vector<Seq>& seqs, int32_t heads, int32_t kv_heads,
                    int32_t head_dim, int32_t block_size, DType kv_dtype = DType::kF32) {
  std::mt19937 rng(heads * 131 + kv_heads * 17 + head_dim + block_size);
  int32_t blocks = 8;  // a few spare, so the tables do not cover the whole pool
  for (const Seq& s : seqs) blocks += (s.context + block_size - 1) / block_size;
  const KvCacheShape shape{.num_layers = 1,
                           .num_blocks = blocks,
                           .block_size = block_size,
                           .num_kv_heads = kv_heads,
                           .head_dim = head_dim,
                           .dtype = kv_dtype};
  auto buffer = *backend->Allocate(shape.total_bytes());
  const PagedKvCache cache{buffer.data(), shape};
  // One slot to round the new tokens in (WriteKv stores those in `cache`).
  KvCacheShape one = shape;
  one.num_blocks = 1;
  one.block_size = 1;
  std::vector<char> one_bytes(one.total_bytes());
  const PagedKvCache scratch{one_bytes.data(), one};
  std::vector<std::vector<int32_t>> tables;
  const BatchInput batch = MakeBatch(seqs, block_size, shape.num_blocks, &rng, &tables);
  const AttentionParams p{.num_heads = heads,
                          .num_kv_heads = kv_heads,
                          .head_dim = head_dim,
                          .scale = 1.f / std::sqrt(static_cast<float>(head_dim))};
  const int32_t kv_width = kv_heads * head_dim;
  // Whole contexts: the cached prefix is written directly, the new tokens via WriteKv.
  std::vector<std::vector<float>> keys, values;
  for (size_t s = 0; s < seqs.size(); ++s) {
    keys.push_back(Random(seqs[s].context * kv_width, &rng));
    values.push_back(Random(seqs[s].context * kv_width, &rng));
    for (int32_t t = 0; t < seqs[s].context - seqs[s].new_tokens; ++t) {
      const int64_t slot = int64_t{tables[s][t / block_size]} * block_size + t % block_size;
      const std::vector<float> k = StoreAsCached(&keys[s][t * kv_width], cache, 0, slot);
      const std::vector<float> v = StoreAsCached(&values[s][t * kv_width], cache, 1, slot);
      std::copy(k.begin(), k.end(), keys[s].begin() + t * kv_width);
      std::copy(v.begin(), v.end(), values[s].begin() + t * kv_width);
    }
  }
  std::vector<float> k_new, v_new;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int32_t first = seqs[s].context - seqs[s].new_tokens;
    k_new.insert(k_new.end(), keys[s].begin() + first * kv_width, keys[s].end());
    v_new.insert(v_new.end(), values[s].begin() + first * kv_width, values[s].end());
  }
  std::vector<float> q = Random(batch.num_tokens() * heads * head_dim, &rng);
  std::vector<float> out(q.size(), std::nanf(""));
  ASSERT_TRUE(backend->PrepareBatch(batch).ok());
  backend->WriteKv(Tensor::Make(k_new.data(), DType::kF32, batch.num_tokens(), kv_width),
                   Tensor::Make(v_new.data(), DType::kF32, batch.num_tokens(), kv_width), cache, 0);
  backend->Attention(Tensor::Make(q.data(), DType::kF32, batch.num_tokens(), heads * head_dim),
                     cache, 0, p,
                     Tensor::Make(out.data(), DType::kF32, batch.num_tokens(), heads * head_dim));
  // The new tokens as the cache holds them (rounded by the test, stored by WriteKv); int8:
  // every token as the cache holds it now.
  for (size_t s = 0; s < seqs.size() && kv_dtype == DType::kI8; ++s) {
    for (int32_t t = 0; t < seqs[s].context; ++t) {
      const int64_t slot = int64_t{tables[s][t / block_size]} * block_size + t % block_size;
      for (int32_t h = 0; h < kv_heads; ++h) {
        for (int32_t e = 0; e < head_dim; ++e) {
          const int64_t i = int64_t{t} * kv_width + h * head_dim + e;
          keys[s][i] = kernels::cpu::LoadInt8(cache, 0, 0, slot, h, e);
          values[s][i] = kernels::cpu::LoadInt8(cache, 0, 1, slot, h, e);
        }
      }
    }
  }
  for (size_t s = 0; s < seqs.size() && kv_dtype != DType::kI8; ++s) {
    for (int32_t t = seqs[s].context - seqs[s].new_tokens; t < seqs[s].context; ++t) {
      const std::vector<float> k = StoreAsCached(&keys[s][t * kv_width], scratch, 0, 0);
      const std::vector<float> v = StoreAsCached(&values[s][t * kv_width], scratch, 1, 0);
      std::copy(k.begin(), k.end(), keys[s].begin() + t * kv_width);
      std::copy(v.begin(), v.end(), values[s].begin() + t * kv_width);
    }
  }
  const std::vector<float> want = ReferenceAttention(batch, q, keys, values, p);
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], want[i], 1e-5) << "element " << i;
  }
}

// f16, bf16 and int8 caches: every value attention reads is the stored one widened exactly
// (int8: what kv_int8.h's LoadInt8 reads back), prefix rows stored by the test and new rows
// by WriteKv alike.
TEST_F(CpuBackendTest, PagedAttentionOverF16Bf16AndInt8Caches) {
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kI8}) {
    ASSERT_TRUE(backend_->SupportsKvDtype(dtype));
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " " << hwy::TargetName(target));
      hwy::SetSupportedTargetsForTest(target);
      CheckAttention(backend_.get(), {{1, 1}, {17, 1}, {70, 1}, {40, 40}}, 8, 2, 16, 16, dtype);
      CheckAttention(backend_.get(), {{150, 150}, {65, 1}, {129, 1}}, 4, 1, 64, 16, dtype);
      CheckAttention(backend_.get(), {{33, 5}, {100, 1}}, 6, 3, 12, 1, dtype);
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

TEST_F(CpuBackendTest, PagedAttentionMatchesContiguousReference) {
  for (int32_t bs : {1, 16, 32}) {
    for (auto [heads, kv] :
         std::vector<std::pair<int32_t, int32_t>>{{4, 4}, {8, 4}, {8, 2}, {8, 1}}) {
      SCOPED_TRACE(::testing::Message() << "block " << bs << " heads " << heads << "/" << kv);
      // Decode only, prefill only, and a mixed batch with contexts around block edges.
      CheckAttention(backend_.get(), {{1, 1}, {bs, 1}, {bs + 1, 1}, {70, 1}}, heads, kv, 16, bs);
      CheckAttention(backend_.get(), {{bs - 1 > 0 ? bs - 1 : 1, bs - 1 > 0 ? bs - 1 : 1}, {40, 40}},
                     heads, kv, 8, bs);
      CheckAttention(backend_.get(), {{37, 5}, {1, 1}, {90, 1}, {33, 33}}, heads, kv, 32, bs);
    }
  }
}

// Model-sized heads (64 and 128 wide, odd widths too), GQA 1/2/8: prefills long enough to be
// split into several query tiles and context chunks, next to decodes crossing blocks.
void CheckWideHeads(Backend* backend) {
  for (int32_t bs : {1, 16, 32}) {
    for (auto [heads, kv] : std::vector<std::pair<int32_t, int32_t>>{{2, 2}, {4, 2}, {8, 1}}) {
      for (int32_t dim : {64, 128}) {
        SCOPED_TRACE(::testing::Message()
                     << "block " << bs << " heads " << heads << "/" << kv << " dim " << dim);
        CheckAttention(backend, {{150, 150}, {65, 1}, {129, 1}, {200, 70}, {2, 1}}, heads, kv, dim,
                       bs);
      }
    }
    SCOPED_TRACE(::testing::Message() << "block " << bs << " dim 12 and 36");
    CheckAttention(backend, {{70, 70}, {33, 1}}, 6, 3, 12, bs);
    CheckAttention(backend, {{70, 3}, {100, 100}}, 4, 1, 36, bs);
  }
}

// The wide-head cases with each instruction set this CPU has (chosen at run time).
TEST_F(CpuBackendTest, PagedAttentionWideHeadsLongContexts) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    CheckWideHeads(backend_.get());
  }
  hwy::SetSupportedTargetsForTest(0);  // back to what the CPU has
}

// Sixty-four decoding sequences of different lengths (the batched decode shape).
TEST_F(CpuBackendTest, PagedAttentionManyDecodes) {
  std::vector<Seq> seqs;
  for (int32_t s = 0; s < 64; ++s) seqs.push_back({1 + (s * 37) % 150, 1});
  CheckAttention(backend_.get(), seqs, 12, 4, 64, 16);
}

// A sequence's attention output is the same bits whatever else is in the batch: alone, its
// KV heads are spread over several work items to keep both threads busy; beside many
// others, one item holds them all, and a prefill's query tiles differ in number. Every
// instruction set this CPU has, each cache type.
TEST_F(CpuBackendTest, PagedAttentionOfASequenceIsTheSameBitsAloneOrInABatch) {
  constexpr int32_t kHeads = 12, kKvHeads = 4, kDim = 64, kBlock = 16;
  const std::vector<Seq> decodes = {{1, 1},  {130, 1}, {64, 1},  {200, 1}, {17, 1},
                                    {65, 1}, {300, 1}, {129, 1}, {2, 1}};
  std::vector<Seq> mixed = decodes;
  mixed.insert(mixed.begin() + 3, {{90, 90}, {33, 5}});
  for (const auto& [seqs, dtype] :
       std::vector<std::pair<std::vector<Seq>, DType>>{{decodes, DType::kF32},
                                                       {mixed, DType::kF32},
                                                       {decodes, DType::kF16},
                                                       {mixed, DType::kBF16},
                                                       {decodes, DType::kI8}}) {
    std::mt19937 rng(7);
    int32_t blocks = 0;
    for (const Seq& s : seqs) blocks += (s.context + kBlock - 1) / kBlock;
    const KvCacheShape shape{.num_layers = 1,
                             .num_blocks = blocks,
                             .block_size = kBlock,
                             .num_kv_heads = kKvHeads,
                             .head_dim = kDim,
                             .dtype = dtype};
    auto buffer = *backend_->Allocate(shape.total_bytes());
    const PagedKvCache cache{buffer.data(), shape};
    std::vector<std::vector<int32_t>> tables;
    const BatchInput all = MakeBatch(seqs, kBlock, blocks, &rng, &tables);
    // Every slot of the pool written (as the cache's type) through WriteKv.
    BatchInput fill;
    fill.query_start_loc = {0, blocks * kBlock};
    fill.max_blocks_per_seq = blocks;
    for (int32_t slot = 0; slot < blocks * kBlock; ++slot) {
      fill.token_ids.push_back(0);
      fill.positions.push_back(slot);
      fill.slot_mapping.push_back(slot);
    }
    for (int32_t b = 0; b < blocks; ++b) fill.block_tables.push_back(b);
    fill.seq_lens = {blocks * kBlock};
    fill.logits_indices = {blocks * kBlock - 1};
    ASSERT_TRUE(backend_->PrepareBatch(fill).ok());
    std::vector<float> k = Random(int64_t{blocks} * kBlock * kKvHeads * kDim, &rng);
    std::vector<float> v = Random(k.size(), &rng);
    backend_->WriteKv(Tensor::Make(k.data(), DType::kF32, blocks * kBlock, kKvHeads * kDim),
                      Tensor::Make(v.data(), DType::kF32, blocks * kBlock, kKvHeads * kDim), cache,
                      0);
    const AttentionParams p{
        .num_heads = kHeads, .num_kv_heads = kKvHeads, .head_dim = kDim, .scale = 0.125f};
    const int64_t width = kHeads * kDim;
    const std::vector<float> q = Random(all.num_tokens() * width, &rng);
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " " << hwy::TargetName(target));
      hwy::SetSupportedTargetsForTest(target);
      std::vector<float> out(q.size(), std::nanf(""));
      ASSERT_TRUE(backend_->PrepareBatch(all).ok());
      backend_->Attention(
          Tensor::Make(const_cast<float*>(q.data()), DType::kF32, all.num_tokens(), width), cache,
          0, p, Tensor::Make(out.data(), DType::kF32, all.num_tokens(), width));
      for (int32_t s = 0; s < all.num_seqs(); ++s) {
        const int32_t begin = all.query_start_loc[s], end = all.query_start_loc[s + 1];
        BatchInput one;
        one.max_blocks_per_seq = all.max_blocks_per_seq;
        one.query_start_loc = {0, end - begin};
        one.token_ids.assign(all.token_ids.begin() + begin, all.token_ids.begin() + end);
        one.positions.assign(all.positions.begin() + begin, all.positions.begin() + end);
        one.slot_mapping.assign(all.slot_mapping.begin() + begin, all.slot_mapping.begin() + end);
        one.seq_lens = {all.seq_lens[s]};
        one.logits_indices = {end - begin - 1};
        const auto row = all.block_tables.begin() + int64_t{s} * all.max_blocks_per_seq;
        one.block_tables.assign(row, row + all.max_blocks_per_seq);
        std::vector<float> alone((end - begin) * width, std::nanf(""));
        ASSERT_TRUE(backend_->PrepareBatch(one).ok());
        backend_->Attention(Tensor::Make(const_cast<float*>(q.data()) + begin * width, DType::kF32,
                                         end - begin, width),
                            cache, 0, p,
                            Tensor::Make(alone.data(), DType::kF32, end - begin, width));
        for (int64_t i = 0; i < static_cast<int64_t>(alone.size()); ++i) {
          ASSERT_EQ(std::bit_cast<uint32_t>(alone[i]),
                    std::bit_cast<uint32_t>(out[begin * width + i]))
              << "sequence " << s << " element " << i;
        }
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

TEST_F(CpuBackendTest, RmsNormRopeSiluMulAddOnStridedViews) {
  std::mt19937 rng(5);
  const int64_t n = 3, dim = 8;
  // x lives in the left half of a wider buffer: a strided column view.
  std::vector<float> wide = Random(n * 2 * dim, &rng);
  const Tensor x = Tensor::Make(wide.data(), DType::kF32, n, 2 * dim).Cols(0, dim);
  std::vector<float> w = Random(dim, &rng), out(n * dim);
  backend_->RmsNorm(x, Tensor::Make(w.data(), DType::kF32, 1, dim), 1e-5f,
                    Tensor::Make(out.data(), DType::kF32, n, dim));
  for (int64_t r = 0; r < n; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < dim; ++c) ss += double{wide[r * 2 * dim + c]} * wide[r * 2 * dim + c];
    const double scale = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int64_t c = 0; c < dim; ++c) {
      EXPECT_NEAR(out[r * dim + c], wide[r * 2 * dim + c] * scale * w[c], 1e-5);
    }
  }
  // RoPE at position 0 is the identity; at position p pair i rotates by p * base^(-2i/d).
  BatchInput b;
  b.positions = {0, 3, 7};
  b.token_ids = {0, 0, 0};
  ASSERT_TRUE(backend_->PrepareBatch(b).ok());
  std::vector<float> q = Random(n * dim, &rng), k = Random(n * dim / 2, &rng);
  const std::vector<float> q0 = q, k0 = k;
  backend_->Rope(
      Tensor::Make(q.data(), DType::kF32, n, dim), Tensor::Make(k.data(), DType::kF32, n, dim / 2),
      {.num_heads = 2, .num_kv_heads = 1, .head_dim = 4, .rope_dim = 4, .freq_base = 10000.f});
  for (int64_t r = 0; r < n; ++r) {
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 2; ++i) {
        const double th = b.positions[r] * std::pow(10000.0, -2.0 * i / 4);
        const size_t a = r * dim + h * 4 + 2 * i;
        EXPECT_NEAR(q[a], q0[a] * std::cos(th) - q0[a + 1] * std::sin(th), 1e-5);
        EXPECT_NEAR(q[a + 1], q0[a] * std::sin(th) + q0[a + 1] * std::cos(th), 1e-5);
      }
    }
  }
  std::vector<float> gate = Random(n * dim, &rng), up = Random(n * dim, &rng), act(n * dim);
  backend_->SiluMul(Tensor::Make(gate.data(), DType::kF32, n, dim),
                    Tensor::Make(up.data(), DType::kF32, n, dim),
                    Tensor::Make(act.data(), DType::kF32, n, dim));
  for (size_t i = 0; i < act.size(); ++i) {
    EXPECT_NEAR(act[i], gate[i] / (1 + std::exp(-gate[i])) * up[i], 1e-6);
  }
}

TEST_F(CpuBackendTest, MatMulIsXTimesWTransposed) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};                     // [2, 3]
  std::vector<float> w = {1, 0, 0, 0, 1, 1, 2, 2, 2, 1, -1, 0};  // [4, 3]
  std::vector<float> out(8);
  backend_->MatMul(Tensor::Make(x.data(), DType::kF32, 2, 3),
                   Tensor::Make(w.data(), DType::kF32, 4, 3),
                   Tensor::Make(out.data(), DType::kF32, 2, 4));
  EXPECT_EQ(out, (std::vector<float>{1, 5, 12, -1, 4, 11, 30, -1}));
}

}  // namespace
}  // namespace pagoda::kernels
