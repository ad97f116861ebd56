// Paged attention on the CPU with SIMD chosen at run time (Google Highway): this file is
// compiled once per instruction set by foreach_target.h, and HWY_DYNAMIC_DISPATCH calls
// the best one the running CPU has (AVX-512, AVX2, SSE4 or portable code).
//
// One work item is (sequence, KV head, tile of consecutive query tokens). The item's
// rows are its queries times the query heads sharing the KV head; every K/V row is
// loaded once per chunk of the context and used by all of them. Softmax is online: per
// chunk of kChunk context tokens the running max and sum are updated and the
// accumulator rescaled, so the context is traversed once.
// The cache may hold f32, f16, bf16 or int8 (K and V: a step per token and head): rows of
// the other types are widened to f32 per chunk into a small scratch tile (64 rows of K and of
// V) as they are read, so no f32 copy of the cache exists.
// SSSE3 adds little over SSE4 and the portable code: not built, to save compile time.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS HWY_SSSE3
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/cpu_attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#ifndef PAGODA_KERNELS_CPU_CPU_ATTENTION_TILE_
#define PAGODA_KERNELS_CPU_CPU_ATTENTION_TILE_
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cpu {

// Context tokens whose scores are held at once; a multiple of every vector width.
constexpr int32_t kChunk = 64;

// One work item. Rows r = qi * group + h (query qi of the tile, head h of the group).
struct TileArgs {
  const float* q = nullptr;  // query head (g * group) of the tile's first token
  int64_t q_stride = 0;      // floats between consecutive tokens of q and of out
  float* out = nullptr;      // same layout as q
  int64_t out_stride = 0;
  const int32_t* positions = nullptr;  // position of each query of the tile, ascending
  int32_t num_queries = 0;
  int32_t group = 0;
  int32_t head_dim = 0;
  float scale = 1.f;
  DType kv_dtype = DType::kF32;  // kF32, kF16, kBF16 or kI8
  const char* k_head = nullptr;  // K plane offset to this KV head
  const char* v_head = nullptr;
  int64_t kv_row_bytes = 0;         // bytes per cached token (all KV heads)
  const float* k_scales = nullptr;  // kI8: K scale plane offset to this KV head
  const float* v_scales = nullptr;  // kI8: V scale plane offset to this KV head
  int32_t num_kv_heads = 0;         // V scales per cached token
  const int32_t* table = nullptr;
  int32_t block_size = 0;
  // rows * (kChunk + head_dim + 2) + 16 floats, aligned to 64 bytes, then 2 * kChunk *
  // head_dim floats for widened K and V rows.
  float* scratch = nullptr;
};

}  // namespace pagoda::kernels::cpu
#endif  // PAGODA_KERNELS_CPU_CPU_ATTENTION_TILE_

HWY_BEFORE_NAMESPACE();
namespace pagoda::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// How many tokens of the chunk [c0, c0 + n) row r sees (causal: up to its position).
struct Visible {
  const int32_t* positions;
  int32_t group, c0, n;
  int32_t operator()(int32_t r) const { return std::clamp(positions[r / group] + 1 - c0, 0, n); }
};

// s[t] = scale * dot(q_r, k_rows[t]) for the rows that see token t (rows >= first[t]).
template <class D>
void Scores(D d, const TileArgs& a, const float* const* k_rows, const int32_t* first, int32_t n,
            int32_t rows, float* scores) {
  const size_t lanes = hn::Lanes(d);
  const int32_t dim = a.head_dim;
  for (int32_t t = 0; t < n; ++t) {
    const float* k = k_rows[t];
    for (int32_t r = first[t]; r < rows; ++r) {
      const float* q = a.q + (r / a.group) * a.q_stride + (r % a.group) * int64_t{dim};
      auto acc0 = hn::Zero(d);
      auto acc1 = hn::Zero(d);
      int32_t e = 0;
      for (; e + 2 * static_cast<int32_t>(lanes) <= dim; e += 2 * lanes) {
        acc0 = hn::MulAdd(hn::LoadU(d, q + e), hn::LoadU(d, k + e), acc0);
        acc1 = hn::MulAdd(hn::LoadU(d, q + e + lanes), hn::LoadU(d, k + e + lanes), acc1);
      }
      for (; e < dim; e += lanes) acc0 = hn::MulAdd(hn::LoadU(d, q + e), hn::LoadU(d, k + e), acc0);
      scores[r * kChunk + t] = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1))) * a.scale;
    }
  }
}

// acc_r += sum_t p[r][t] * v_rows[t] over the t < visible(r), four vectors at a time.
template <class D>
void AccumulateValues(D d, const TileArgs& a, const float* const* v_rows, const Visible& visible,
                      int32_t rows, const float* probs, float* acc) {
  const int32_t lanes = static_cast<int32_t>(hn::Lanes(d));
  const int32_t dim = a.head_dim;
  int32_t r = 0;
  // Two rows at a time share every V load; probabilities past visible(r) are zero.
  for (; r + 1 < rows; r += 2) {
    const float* p0 = probs + r * kChunk;
    const float* p1 = p0 + kChunk;
    float* o = acc + r * int64_t{dim};
    const int32_t vis = std::max(visible(r), visible(r + 1));
    int32_t e = 0;
    for (; e + 2 * lanes <= dim; e += 2 * lanes) {
      auto a0 = hn::LoadU(d, o + e), a1 = hn::LoadU(d, o + e + lanes);
      auto b0 = hn::LoadU(d, o + dim + e), b1 = hn::LoadU(d, o + dim + e + lanes);
      for (int32_t t = 0; t < vis; ++t) {
        const auto w0 = hn::Set(d, p0[t]), w1 = hn::Set(d, p1[t]);
        const auto v0 = hn::LoadU(d, v_rows[t] + e), v1 = hn::LoadU(d, v_rows[t] + e + lanes);
        a0 = hn::MulAdd(w0, v0, a0);
        a1 = hn::MulAdd(w0, v1, a1);
        b0 = hn::MulAdd(w1, v0, b0);
        b1 = hn::MulAdd(w1, v1, b1);
      }
      hn::StoreU(a0, d, o + e);
      hn::StoreU(a1, d, o + e + lanes);
      hn::StoreU(b0, d, o + dim + e);
      hn::StoreU(b1, d, o + dim + e + lanes);
    }
    for (; e < dim; e += lanes) {
      auto a0 = hn::LoadU(d, o + e), b0 = hn::LoadU(d, o + dim + e);
      for (int32_t t = 0; t < vis; ++t) {
        const auto v0 = hn::LoadU(d, v_rows[t] + e);
        a0 = hn::MulAdd(hn::Set(d, p0[t]), v0, a0);
        b0 = hn::MulAdd(hn::Set(d, p1[t]), v0, b0);
      }
      hn::StoreU(a0, d, o + e);
      hn::StoreU(b0, d, o + dim + e);
    }
  }
  if (r < rows) {
    const float* p = probs + r * kChunk;
    float* o = acc + r * int64_t{dim};
    const int32_t vis = visible(r);
    for (int32_t e = 0; e < dim; e += lanes) {
      auto a0 = hn::LoadU(d, o + e);
      for (int32_t t = 0; t < vis; ++t) {
        a0 = hn::MulAdd(hn::Set(d, p[t]), hn::LoadU(d, v_rows[t] + e), a0);
      }
      hn::StoreU(a0, d, o + e);
    }
  }
}

// Online softmax step for one chunk: updates max m and sum l of every row that sees a
// token of it, rescales its accumulator and turns its scores into probabilities.
template <class D>
void SoftmaxStep(D d, const TileArgs& a, const Visible& visible, int32_t rows, float* scores,
                 float* m, float* l, float* acc) {
  const hn::ScalableTag<float> df;  // the chunk is a multiple of the full width
  const size_t lanes = hn::Lanes(df);
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t vis = visible(r);
    float* s = scores + r * kChunk;
    if (vis == 0) {
      for (int32_t t = 0; t < kChunk; ++t) s[t] = 0.f;
      continue;
    }
    const int32_t padded = static_cast<int32_t>((vis + lanes - 1) / lanes * lanes);
    for (int32_t t = vis; t < padded; ++t) s[t] = -HUGE_VALF;
    auto vmax = hn::Set(df, -HUGE_VALF);
    for (int32_t t = 0; t < padded; t += lanes) vmax = hn::Max(vmax, hn::Load(df, s + t));
    const float m_new = std::max(m[r], hn::GetLane(hn::MaxOfLanes(df, vmax)));
    if (m_new != m[r]) {
      const float correction = std::exp(m[r] - m_new);  // 0 on the first chunk
      l[r] *= correction;
      const auto c = hn::Set(d, correction);
      float* o = acc + r * int64_t{a.head_dim};
      for (int32_t e = 0; e < a.head_dim; e += hn::Lanes(d)) {
        hn::StoreU(hn::Mul(hn::LoadU(d, o + e), c), d, o + e);
      }
      m[r] = m_new;
    }
    const auto vm = hn::Set(df, m_new);
    auto vsum = hn::Zero(df);
    for (int32_t t = 0; t < padded; t += lanes) {
      const auto p = hn::Exp(df, hn::Sub(hn::Load(df, s + t), vm));
      hn::Store(p, df, s + t);
      vsum = hn::Add(vsum, p);
    }
    l[r] += hn::GetLane(hn::SumOfLanes(df, vsum));
    for (int32_t t = padded; t < kChunk; ++t) s[t] = 0.f;  // exp already zeroed [vis, padded)
  }
}

// Widens the n cached vectors at `rows` (stored as a.kv_dtype; int8: codes times *scales[t])
// into consecutive f32 rows of `dst` and points rows[t] at them.
template <class D>
void WidenRows(D d, const TileArgs& a, const float** rows, const float* const* scales, int32_t n,
               float* dst) {
  const int32_t lanes = static_cast<int32_t>(hn::Lanes(d));
  const int32_t dim = a.head_dim;
  for (int32_t t = 0; t < n; ++t) {
    const char* src = reinterpret_cast<const char*>(rows[t]);
    float* out = dst + int64_t{t} * dim;
    if (a.kv_dtype == DType::kF16) {
      const hn::Rebind<hwy::float16_t, D> dh;
      const auto* h = reinterpret_cast<const hwy::float16_t*>(src);
      for (int32_t e = 0; e < dim; e += lanes)
        hn::StoreU(hn::PromoteTo(d, hn::LoadU(dh, h + e)), d, out + e);
    } else if (a.kv_dtype == DType::kBF16) {
      const hn::Rebind<hwy::bfloat16_t, D> db;
      const auto* b = reinterpret_cast<const hwy::bfloat16_t*>(src);
      for (int32_t e = 0; e < dim; e += lanes)
        hn::StoreU(hn::PromoteTo(d, hn::LoadU(db, b + e)), d, out + e);
    } else {  // kI8
      const hn::Rebind<int8_t, D> d8;
      const hn::Rebind<int32_t, D> di;
      const auto scale = hn::Set(d, *scales[t]);
      const auto* q = reinterpret_cast<const int8_t*>(src);
      for (int32_t e = 0; e < dim; e += lanes) {
        const auto x = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q + e)));
        hn::StoreU(hn::Mul(x, scale), d, out + e);
      }
    }
    rows[t] = out;
  }
}

template <class D>
void AttendTileWith(D d, const TileArgs& a) {
  const int32_t rows = a.num_queries * a.group;
  const int32_t dim = a.head_dim;
  float* scores = a.scratch;
  float* acc = scores + int64_t{rows} * kChunk;
  float* m = acc + int64_t{rows} * dim;
  float* l = m + rows;
  const int64_t used = int64_t{rows} * (kChunk + dim + 2);
  float* wide = scores + (used + 15) / 16 * 16;  // 64-byte aligned
  for (int64_t i = 0; i < int64_t{rows} * dim; ++i) acc[i] = 0.f;
  for (int32_t r = 0; r < rows; ++r) m[r] = -HUGE_VALF, l[r] = 0.f;

  const float* k_rows[kChunk];
  const float* v_rows[kChunk];
  const float* k_scale[kChunk];
  const float* v_scale[kChunk];
  int32_t first[kChunk];  // first row that sees chunk token t
  float* k_wide = wide;   // widened rows when the cache is not f32
  float* v_wide = k_wide + int64_t{kChunk} * dim;
  const bool widen = a.kv_dtype != DType::kF32;
  const int32_t head_bytes = dim * static_cast<int32_t>(DTypeSize(a.kv_dtype));
  const auto prefetch = [&](int64_t slot) {
    for (int32_t b = 0; b < head_bytes; b += 64) {
      hwy::Prefetch(a.k_head + slot * a.kv_row_bytes + b);
      hwy::Prefetch(a.v_head + slot * a.kv_row_bytes + b);
    }
  };
  const int32_t ctx = a.positions[a.num_queries - 1] + 1;
  for (int32_t c0 = 0; c0 < ctx; c0 += kChunk) {
    const int32_t n = std::min(kChunk, ctx - c0);
    int32_t qi = 0;
    for (int32_t t = 0; t < n; ++t) {
      const int32_t pos = c0 + t;
      const int64_t slot = int64_t{a.table[pos / a.block_size]} * a.block_size + pos % a.block_size;
      k_rows[t] = reinterpret_cast<const float*>(a.k_head + slot * a.kv_row_bytes);
      v_rows[t] = reinterpret_cast<const float*>(a.v_head + slot * a.kv_row_bytes);
      // The chunk's K and V rows are requested all at once, so their cache misses overlap
      // instead of stalling the dot products one row at a time (measured: 1.5x at 16
      // sequences of 2048 tokens; a chunk further ahead gained nothing more).
      prefetch(slot);
      if (a.k_scales != nullptr) {
        k_scale[t] = a.k_scales + slot * a.num_kv_heads;
        v_scale[t] = a.v_scales + slot * a.num_kv_heads;
      }
      while (a.positions[qi] < pos) ++qi;  // the last query sees every token of ctx
      first[t] = qi * a.group;
    }
    if (widen) {
      WidenRows(d, a, k_rows, k_scale, n, k_wide);
      WidenRows(d, a, v_rows, v_scale, n, v_wide);
    }
    const Visible visible{a.positions, a.group, c0, n};
    // One way of computing a score for every tile shape: a query's result must not depend
    // on how many other queries share its tile (batch invariance, docs/ARCHITECTURE.md).
    Scores(d, a, k_rows, first, n, rows, scores);
    SoftmaxStep(d, a, visible, rows, scores, m, l, acc);
    AccumulateValues(d, a, v_rows, visible, rows, scores, acc);
  }
  for (int32_t r = 0; r < rows; ++r) {
    const float inv = 1.f / l[r];
    float* o = a.out + (r / a.group) * a.out_stride + (r % a.group) * int64_t{dim};
    const float* src = acc + r * int64_t{dim};
    for (int32_t e = 0; e < dim; ++e) o[e] = src[e] * inv;
  }
}

// Picks the widest vector that divides head_dim.
void AttendTile(const TileArgs& a) {
  const hn::ScalableTag<float> full;
  if (a.head_dim % hn::Lanes(full) == 0) return AttendTileWith(full, a);
  const hn::CappedTag<float, 8> d8;
  if (a.head_dim % hn::Lanes(d8) == 0) return AttendTileWith(d8, a);
  const hn::CappedTag<float, 4> d4;
  if (a.head_dim % hn::Lanes(d4) == 0) return AttendTileWith(d4, a);
  AttendTileWith(hn::CappedTag<float, 1>(), a);
}

}  // namespace HWY_NAMESPACE
}  // namespace pagoda::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_attention.h"
#include "kernels/cpu/kv_int8.h"
#include "kernels/quant/half.h"

namespace pagoda::kernels::cpu {

HWY_EXPORT(AttendTile);

namespace {

// Query rows (tokens x heads of a group) per work item at most: bounds the scratch and
// keeps several items per sequence in a long prefill so both threads get work.
constexpr int32_t kMaxTileRows = 64;
// Work below this many multiply-adds runs on the calling thread: waking workers costs more.
constexpr int64_t kMinParallelWork = 1 << 15;

struct Item {
  int32_t seq;
  int32_t first_token;  // batch index of the tile's first query
  int32_t num_queries;
  int32_t kv_head;
  int64_t cost;  // multiply-adds, for ordering
};

// Tiles of every sequence times KV heads, most expensive first.
std::vector<Item> PlanItems(const BatchInput& batch, int32_t kv_heads, int32_t group) {
  const int32_t tile = std::max(1, kMaxTileRows / group);
  std::vector<Item> items;
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t begin = batch.query_start_loc[s], end = batch.query_start_loc[s + 1];
    for (int32_t i = begin; i < end; i += tile) {
      const int32_t n = std::min(tile, end - i);
      const int64_t cost = int64_t{n} * (batch.positions[i + n - 1] + 1);
      for (int32_t g = 0; g < kv_heads; ++g) items.push_back({s, i, n, g, cost});
    }
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& x, const Item& y) { return x.cost > y.cost; });
  return items;
}

}  // namespace

namespace {

// Stores one token's vectors (all KV heads, f32) at `dst` in the cache's type (not kI8).
void StoreRow(const float* src, const KvCacheShape& shape, char* dst) {
  const int64_t width = shape.token_elems();
  switch (shape.dtype) {
    case DType::kF16: {
      auto* h = reinterpret_cast<uint16_t*>(dst);
      for (int64_t e = 0; e < width; ++e) h[e] = quant::FloatToHalf(src[e]);
      return;
    }
    case DType::kBF16: {
      auto* b = reinterpret_cast<uint16_t*>(dst);
      for (int64_t e = 0; e < width; ++e) b[e] = quant::FloatToBf16(src[e]);
      return;
    }
    default:
      std::memcpy(dst, src, static_cast<size_t>(width) * sizeof(float));
  }
}

}  // namespace

bool SupportsKvDtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
         dtype == DType::kI8;
}

void WriteKv(const BatchInput& batch, const Tensor& k, const Tensor& v, const PagedKvCache& cache,
             int32_t layer, ThreadPool* pool) {
  const KvCacheShape& shape = cache.shape;
  if (shape.dtype == DType::kI8) {
    for (int32_t i = 0; i < batch.num_tokens(); ++i) {
      const int64_t slot = batch.slot_mapping[i];
      if (slot < 0) continue;
      StoreInt8(k.row<float>(i), cache, layer, 0, slot);
      StoreInt8(v.row<float>(i), cache, layer, 1, slot);
    }
    return;
  }
  const int64_t row_bytes = shape.token_elems() * static_cast<int64_t>(DTypeSize(shape.dtype));
  auto* k_plane = static_cast<char*>(cache.Plane(layer, 0));
  auto* v_plane = static_cast<char*>(cache.Plane(layer, 1));
  for (int32_t i = 0; i < batch.num_tokens(); ++i) {
    const int64_t slot = batch.slot_mapping[i];
    if (slot < 0) continue;
    StoreRow(k.row<float>(i), shape, k_plane + slot * row_bytes);
    StoreRow(v.row<float>(i), shape, v_plane + slot * row_bytes);
  }
}

void PagedAttention(const BatchInput& batch, const Tensor& q, const PagedKvCache& cache,
                    int32_t layer, const AttentionParams& params, const Tensor& out,
                    ThreadPool* pool) {
  const int32_t kv_heads = params.num_kv_heads;
  const int32_t group = params.num_heads / kv_heads;
  const int32_t head_dim = params.head_dim;
  const KvCacheShape& shape = cache.shape;
  const int64_t elem_bytes = static_cast<int64_t>(DTypeSize(shape.dtype));
  const auto* k_plane = static_cast<const char*>(cache.Plane(layer, 0));
  const auto* v_plane = static_cast<const char*>(cache.Plane(layer, 1));
  const float* k_scales = shape.has_scales() ? cache.Scales(layer, 0) : nullptr;
  const float* v_scales = shape.has_scales() ? cache.Scales(layer, 1) : nullptr;
  const std::vector<Item> items = PlanItems(batch, kv_heads, group);
  int64_t work = 0;
  for (const Item& item : items) work += item.cost;
  work *= int64_t{group} * head_dim * 2;

  std::atomic<int64_t> next{0};
  const int64_t participants = work < kMinParallelWork ? 1 : pool->num_threads();
  pool->ParallelFor(participants, 1, [&](int64_t, int64_t) {
    thread_local std::vector<float> scratch;
    // The layout TileArgs::scratch describes, for the largest tile, and 16 for alignment.
    const size_t need = static_cast<size_t>(kMaxTileRows + group) * (kChunk + head_dim + 2) +
                        static_cast<size_t>(head_dim) * kChunk * 2 + 32;
    if (scratch.size() < need) scratch.resize(need);
    float* aligned = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) &
                                              ~uintptr_t{63});
    for (int64_t k = next.fetch_add(1); k < static_cast<int64_t>(items.size());
         k = next.fetch_add(1)) {
      const Item& it = items[k];
      const int64_t head_offset = int64_t{it.kv_head} * group * head_dim;
      TileArgs a;
      a.q = q.row<float>(it.first_token) + head_offset;
      a.q_stride = q.stride;
      a.out = out.row<float>(it.first_token) + head_offset;
      a.out_stride = out.stride;
      a.positions = batch.positions.data() + it.first_token;
      a.num_queries = it.num_queries;
      a.group = group;
      a.head_dim = head_dim;
      a.scale = params.scale;
      a.kv_dtype = shape.dtype;
      a.k_head = k_plane + int64_t{it.kv_head} * head_dim * elem_bytes;
      a.v_head = v_plane + int64_t{it.kv_head} * head_dim * elem_bytes;
      a.kv_row_bytes = shape.token_elems() * elem_bytes;
      if (k_scales != nullptr) {
        a.k_scales = k_scales + it.kv_head;
        a.v_scales = v_scales + it.kv_head;
      }
      a.num_kv_heads = shape.num_kv_heads;
      a.table = batch.block_tables.data() + int64_t{it.seq} * batch.max_blocks_per_seq;
      a.block_size = cache.shape.block_size;
      a.scratch = aligned;
      HWY_DYNAMIC_DISPATCH(AttendTile)(a);
    }
  });
}

}  // namespace pagoda::kernels::cpu
#endif  // HWY_ONCE
