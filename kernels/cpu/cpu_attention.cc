// Paged attention on the CPU with SIMD chosen at run time (Google Highway): this file is
// compiled once per instruction set by foreach_target.h, and HWY_DYNAMIC_DISPATCH calls
// the best one the running CPU has (AVX-512, AVX2, SSE4 or portable code).
//
// One work item is (sequence, tile of consecutive query tokens, run of KV heads). Per KV
// head the item's rows are its queries times the query heads sharing that KV head; every
// K/V row is loaded once per chunk of the context and used by all of them. Softmax is
// online: per chunk of kChunk context tokens the running max and sum are updated and the
// accumulator rescaled, so the context is traversed once. An item's KV heads go through
// each chunk one after the other, so the chunk's cached rows (all heads of a token are
// adjacent) are read as whole contiguous runs; a head's arithmetic is the same whichever
// item holds it (batch invariance).
// The cache may hold f32, f16, bf16 or int8 (K and V: a step per token and head): f16 and
// bf16 values are widened to f32 in registers as they are loaded; int8 rows are widened per
// chunk into a small scratch tile (64 rows of K and of V), so no f32 copy of the cache exists.
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
#include <type_traits>

#include "kernels/quant/half.h"
#include "kernels/tensor.h"

namespace pagoda::kernels::cpu {

// Context tokens whose scores are held at once; a multiple of every vector width.
constexpr int32_t kChunk = 64;

// One work item. Rows r = qi * group + h (query qi of the tile, head h of the group).
struct TileArgs {
  // Query head g * group of the tile's first token, g the item's first KV head.
  const float* q = nullptr;
  int64_t q_stride = 0;  // floats between consecutive tokens of q and of out
  float* out = nullptr;  // same layout as q
  int64_t out_stride = 0;
  const int32_t* positions = nullptr;  // position of each query of the tile, ascending
  int32_t num_queries = 0;
  int32_t group = 0;
  int32_t head_dim = 0;
  float scale = 1.f;
  DType kv_dtype = DType::kF32;  // kF32, kF16, kBF16 or kI8
  int32_t kv_heads = 1;          // KV heads of the item: g, g + 1, ...
  const char* k_head = nullptr;  // K plane offset to KV head g
  const char* v_head = nullptr;
  int64_t kv_row_bytes = 0;         // bytes per cached token (all KV heads)
  const float* k_scales = nullptr;  // kI8: K scale plane offset to KV head g
  const float* v_scales = nullptr;  // kI8: V scale plane offset to KV head g
  int32_t num_kv_heads = 0;         // V scales per cached token
  const int32_t* table = nullptr;
  int32_t block_size = 0;
  // Per KV head, rows * (kChunk + head_dim + 2) floats rounded up to 16, aligned to 64
  // bytes; then 2 * kChunk * head_dim floats for widened K and V rows.
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

// A vector of cached values as f32: f32 rows are loaded, f16 and bf16 widened as they
// are loaded (exactly: every such value is an f32).
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadKv(D d, const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(d, p);
  } else {
    const hn::Rebind<T, D> dt;
    return hn::PromoteTo(d, hn::LoadU(dt, p));
  }
}

// Reduces the `lanes` vectors at `part` (consecutive, aligned; overwritten) to one vector
// whose lane j is the sum of vector j's lanes. Every sum is the same pairwise tree over its
// vector's lanes (neighbours first), whichever lane it ends in.
template <class D>
hn::Vec<D> TransposeSums(D d, float* part) {
#if HWY_TARGET != HWY_SCALAR  // one lane: nothing to add
  if constexpr (hn::MaxLanes(d) > 1) {
    const int32_t lanes = static_cast<int32_t>(hn::Lanes(d));
    for (int32_t count = lanes; count > 1; count /= 2) {
      for (int32_t j = 0; j < count / 2; ++j) {
        const auto lo = hn::Load(d, part + 2 * j * lanes);
        const auto hi = hn::Load(d, part + (2 * j + 1) * lanes);
        hn::Store(hn::Add(hn::ConcatEven(d, hi, lo), hn::ConcatOdd(d, hi, lo)), d,
                  part + j * lanes);
      }
    }
  }
#endif
  return hn::Load(d, part);
}

// s[t] = scale * dot(q_r, k_rows[t]) for the R rows from r0 (one query token's heads of
// this KV head: the same visible count `vis`) and every token t < vis, a vector of tokens
// at a time (the last vector may run past vis, up to k_rows[n - 1]: those scores are
// SoftmaxStep's to overwrite). Each K vector is loaded (widened) once for the R rows. One
// way of computing a score for every tile shape: two accumulators over head_dim (even and
// odd vectors), added, then the lanes summed pairwise, so a query's result does not depend
// on how many other queries share its tile (batch invariance, docs/ARCHITECTURE.md).
template <int R, class D, typename T>
void ScoreRows(D d, const TileArgs& a, const T* const* k_rows, int32_t n, int32_t vis, int32_t r0,
               float* scores) {
  const int32_t lanes = static_cast<int32_t>(hn::Lanes(d));
  const int32_t dim = a.head_dim;
  const auto scale = hn::Set(d, a.scale);
  constexpr int32_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN float part[R][kMaxLanes * kMaxLanes];
  const float* q[R];
  for (int32_t i = 0; i < R; ++i) {
    const int32_t r = r0 + i;
    q[i] = a.q + (r / a.group) * a.q_stride + (r % a.group) * int64_t{dim};
  }
  for (int32_t t0 = 0; t0 < vis; t0 += lanes) {
    for (int32_t j = 0; j < lanes; ++j) {
      const T* k = k_rows[std::min(t0 + j, n - 1)];
      hn::Vec<D> acc0[R], acc1[R];
      for (int32_t i = 0; i < R; ++i) acc0[i] = acc1[i] = hn::Zero(d);
      int32_t e = 0;
      for (; e + 2 * lanes <= dim; e += 2 * lanes) {
        const auto k0 = LoadKv(d, k + e), k1 = LoadKv(d, k + e + lanes);
        for (int32_t i = 0; i < R; ++i) {
          acc0[i] = hn::MulAdd(hn::LoadU(d, q[i] + e), k0, acc0[i]);
          acc1[i] = hn::MulAdd(hn::LoadU(d, q[i] + e + lanes), k1, acc1[i]);
        }
      }
      for (; e < dim; e += lanes) {
        const auto k0 = LoadKv(d, k + e);
        for (int32_t i = 0; i < R; ++i) acc0[i] = hn::MulAdd(hn::LoadU(d, q[i] + e), k0, acc0[i]);
      }
      for (int32_t i = 0; i < R; ++i) hn::Store(hn::Add(acc0[i], acc1[i]), d, part[i] + j * lanes);
    }
    for (int32_t i = 0; i < R; ++i) {
      hn::StoreU(hn::Mul(TransposeSums(d, part[i]), scale), d, scores + (r0 + i) * kChunk + t0);
    }
  }
}

// ScoreRows for every row: a query token's `group` rows (one visible count) up to four at a
// time.
template <class D, typename T>
void Scores(D d, const TileArgs& a, const T* const* k_rows, const Visible& visible, int32_t n,
            int32_t rows, float* scores) {
  for (int32_t r0 = 0; r0 < rows; r0 += a.group) {
    const int32_t vis = visible(r0);
    for (int32_t g = 0; g < a.group; g += 4) {
      switch (std::min(4, a.group - g)) {
        case 1:
          ScoreRows<1>(d, a, k_rows, n, vis, r0 + g, scores);
          break;
        case 2:
          ScoreRows<2>(d, a, k_rows, n, vis, r0 + g, scores);
          break;
        case 3:
          ScoreRows<3>(d, a, k_rows, n, vis, r0 + g, scores);
          break;
        default:
          ScoreRows<4>(d, a, k_rows, n, vis, r0 + g, scores);
          break;
      }
    }
  }
}

// acc_r += sum_t p_r[t] * v_rows[t] over t < vis for R consecutive rows (probabilities at
// p, kChunk apart; accumulators at o, dim apart) that share every V load. A row's
// probabilities past its own visible count are zero, so its sums are those it would get
// alone (adding +0 * v changes nothing).
template <int R, class D, typename T>
void AccumulateRowBlock(D d, int32_t dim, const T* const* v_rows, int32_t vis, const float* p,
                        float* o) {
  static_assert(R >= 1 && R <= 4);
  const int32_t lanes = static_cast<int32_t>(hn::Lanes(d));
  const float* p1 = p + (R > 1 ? kChunk : 0);
  const float* p2 = p + (R > 2 ? 2 * kChunk : 0);
  const float* p3 = p + (R > 3 ? 3 * kChunk : 0);
  float* o1 = o + (R > 1 ? dim : 0);
  float* o2 = o + (R > 2 ? 2 * dim : 0);
  float* o3 = o + (R > 3 ? 3 * dim : 0);  // rows past R alias row 0, never stored
  int32_t e = 0;
  for (; e + 2 * lanes <= dim; e += 2 * lanes) {
    auto a0 = hn::LoadU(d, o + e), a1 = hn::LoadU(d, o + e + lanes);
    auto b0 = hn::LoadU(d, o1 + e), b1 = hn::LoadU(d, o1 + e + lanes);
    auto c0 = hn::LoadU(d, o2 + e), c1 = hn::LoadU(d, o2 + e + lanes);
    auto d0 = hn::LoadU(d, o3 + e), d1 = hn::LoadU(d, o3 + e + lanes);
    for (int32_t t = 0; t < vis; ++t) {
      const auto v0 = LoadKv(d, v_rows[t] + e), v1 = LoadKv(d, v_rows[t] + e + lanes);
      const auto w0 = hn::Set(d, p[t]);
      a0 = hn::MulAdd(w0, v0, a0);
      a1 = hn::MulAdd(w0, v1, a1);
      if constexpr (R > 1) {
        const auto w1 = hn::Set(d, p1[t]);
        b0 = hn::MulAdd(w1, v0, b0);
        b1 = hn::MulAdd(w1, v1, b1);
      }
      if constexpr (R > 2) {
        const auto w2 = hn::Set(d, p2[t]);
        c0 = hn::MulAdd(w2, v0, c0);
        c1 = hn::MulAdd(w2, v1, c1);
      }
      if constexpr (R > 3) {
        const auto w3 = hn::Set(d, p3[t]);
        d0 = hn::MulAdd(w3, v0, d0);
        d1 = hn::MulAdd(w3, v1, d1);
      }
    }
    if constexpr (R > 3) hn::StoreU(d0, d, o3 + e), hn::StoreU(d1, d, o3 + e + lanes);
    if constexpr (R > 2) hn::StoreU(c0, d, o2 + e), hn::StoreU(c1, d, o2 + e + lanes);
    if constexpr (R > 1) hn::StoreU(b0, d, o1 + e), hn::StoreU(b1, d, o1 + e + lanes);
    hn::StoreU(a0, d, o + e);
    hn::StoreU(a1, d, o + e + lanes);
  }
  for (; e < dim; e += lanes) {
    auto a0 = hn::LoadU(d, o + e), b0 = hn::LoadU(d, o1 + e);
    auto c0 = hn::LoadU(d, o2 + e), d0 = hn::LoadU(d, o3 + e);
    for (int32_t t = 0; t < vis; ++t) {
      const auto v0 = LoadKv(d, v_rows[t] + e);
      a0 = hn::MulAdd(hn::Set(d, p[t]), v0, a0);
      if constexpr (R > 1) b0 = hn::MulAdd(hn::Set(d, p1[t]), v0, b0);
      if constexpr (R > 2) c0 = hn::MulAdd(hn::Set(d, p2[t]), v0, c0);
      if constexpr (R > 3) d0 = hn::MulAdd(hn::Set(d, p3[t]), v0, d0);
    }
    if constexpr (R > 3) hn::StoreU(d0, d, o3 + e);
    if constexpr (R > 2) hn::StoreU(c0, d, o2 + e);
    if constexpr (R > 1) hn::StoreU(b0, d, o1 + e);
    hn::StoreU(a0, d, o + e);
  }
}

// acc_r += sum_t p[r][t] * v_rows[t] over the t < visible(r), four rows at a time.
template <class D, typename T>
void AccumulateValues(D d, const TileArgs& a, const T* const* v_rows, const Visible& visible,
                      int32_t rows, const float* probs, float* acc) {
  const int32_t dim = a.head_dim;
  int32_t r = 0;
  // visible(r) does not decrease with r: a block's last row sees the most.
  for (; r + 4 <= rows; r += 4) {
    AccumulateRowBlock<4>(d, dim, v_rows, visible(r + 3), probs + r * kChunk, acc + r * dim);
  }
  const float* p = probs + r * kChunk;
  float* o = acc + int64_t{r} * dim;
  switch (rows - r) {
    case 3:
      AccumulateRowBlock<3>(d, dim, v_rows, visible(r + 2), p, o);
      break;
    case 2:
      AccumulateRowBlock<2>(d, dim, v_rows, visible(r + 1), p, o);
      break;
    case 1:
      AccumulateRowBlock<1>(d, dim, v_rows, visible(r), p, o);
      break;
    default:
      break;
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

// Widens the n int8 vectors at `rows` (codes times *scales[t]) into consecutive f32 rows of
// `dst` and points rows[t] at them.
template <class D>
void WidenInt8Rows(D d, const TileArgs& a, const float** rows, const float* const* scales,
                   int32_t n, float* dst) {
  const int32_t lanes = static_cast<int32_t>(hn::Lanes(d));
  const int32_t dim = a.head_dim;
  const hn::Rebind<int8_t, D> d8;
  const hn::Rebind<int32_t, D> di;
  for (int32_t t = 0; t < n; ++t) {
    const auto* q = reinterpret_cast<const int8_t*>(rows[t]);
    float* out = dst + int64_t{t} * dim;
    const auto scale = hn::Set(d, *scales[t]);
    for (int32_t e = 0; e < dim; e += lanes) {
      const auto x = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q + e)));
      hn::StoreU(hn::Mul(x, scale), d, out + e);
    }
    rows[t] = out;
  }
}

// The running state of one KV head's rows: scores of the chunk, accumulators, max, sum.
struct HeadState {
  float* scores;
  float* acc;
  float* m;
  float* l;
};

// T: the cache's element type (float for f32 and for int8, which is widened per chunk).
template <class D, typename T>
void AttendTileWith(D d, const TileArgs& a) {
  const int32_t rows = a.num_queries * a.group;
  const int32_t dim = a.head_dim;
  // Each head's state starts 64-byte aligned (the scores are loaded aligned).
  const int64_t state_floats = (int64_t{rows} * (kChunk + dim + 2) + 15) / 16 * 16;
  const auto state = [&](int32_t h) {
    float* scores = a.scratch + h * state_floats;
    float* acc = scores + int64_t{rows} * kChunk;
    float* m = acc + int64_t{rows} * dim;
    return HeadState{scores, acc, m, m + rows};
  };
  for (int32_t h = 0; h < a.kv_heads; ++h) {
    const HeadState st = state(h);
    for (int64_t i = 0; i < int64_t{rows} * dim; ++i) st.acc[i] = 0.f;
    for (int32_t r = 0; r < rows; ++r) st.m[r] = -HUGE_VALF, st.l[r] = 0.f;
  }
  float* wide = a.scratch + a.kv_heads * state_floats;  // 64-byte aligned

  const char* k_rows[kChunk];  // token t's row at KV head g
  const char* v_rows[kChunk];
  const float* k_scale[kChunk];
  const float* v_scale[kChunk];
  const T* k_head_rows[kChunk];  // ... at the head being computed (int8: its widened copy)
  const T* v_head_rows[kChunk];
  const float* k_head_scale[kChunk];
  const float* v_head_scale[kChunk];
  float* k_wide = wide;  // widened rows of an int8 cache
  float* v_wide = k_wide + int64_t{kChunk} * dim;
  const int32_t head_bytes = dim * static_cast<int32_t>(DTypeSize(a.kv_dtype));
  const int32_t item_bytes = head_bytes * a.kv_heads;  // the item's part of a cached token
  const auto prefetch = [&](const char* row) {
    for (int32_t b = 0; b < item_bytes; b += 64) hwy::Prefetch(row + b);
  };
  const int32_t ctx = a.positions[a.num_queries - 1] + 1;
  for (int32_t c0 = 0; c0 < ctx; c0 += kChunk) {
    const int32_t n = std::min(kChunk, ctx - c0);
    for (int32_t t = 0; t < n; ++t) {
      const int32_t pos = c0 + t;
      const int64_t slot = int64_t{a.table[pos / a.block_size]} * a.block_size + pos % a.block_size;
      k_rows[t] = a.k_head + slot * a.kv_row_bytes;
      v_rows[t] = a.v_head + slot * a.kv_row_bytes;
      // The chunk's K and V rows are requested all at once, so their cache misses overlap
      // instead of stalling the dot products one row at a time (measured: 1.5x at 16
      // sequences of 2048 tokens; a chunk further ahead gained nothing more).
      prefetch(k_rows[t]);
      prefetch(v_rows[t]);
      if (a.k_scales != nullptr) {
        k_scale[t] = a.k_scales + slot * a.num_kv_heads;
        v_scale[t] = a.v_scales + slot * a.num_kv_heads;
      }
    }
    const Visible visible{a.positions, a.group, c0, n};
    for (int32_t h = 0; h < a.kv_heads; ++h) {
      for (int32_t t = 0; t < n; ++t) {
        k_head_rows[t] = reinterpret_cast<const T*>(k_rows[t] + h * head_bytes);
        v_head_rows[t] = reinterpret_cast<const T*>(v_rows[t] + h * head_bytes);
      }
      if constexpr (std::is_same_v<T, float>) {
        if (a.kv_dtype == DType::kI8) {
          for (int32_t t = 0; t < n; ++t) k_head_scale[t] = k_scale[t] + h;
          for (int32_t t = 0; t < n; ++t) v_head_scale[t] = v_scale[t] + h;
          WidenInt8Rows(d, a, k_head_rows, k_head_scale, n, k_wide);
          WidenInt8Rows(d, a, v_head_rows, v_head_scale, n, v_wide);
        }
      }
      TileArgs ah = a;
      ah.q = a.q + int64_t{h} * a.group * dim;
      const HeadState st = state(h);
      Scores(d, ah, k_head_rows, visible, n, rows, st.scores);
      SoftmaxStep(d, ah, visible, rows, st.scores, st.m, st.l, st.acc);
      AccumulateValues(d, ah, v_head_rows, visible, rows, st.scores, st.acc);
    }
  }
  for (int32_t h = 0; h < a.kv_heads; ++h) {
    const HeadState st = state(h);
    float* out = a.out + int64_t{h} * a.group * dim;
    for (int32_t r = 0; r < rows; ++r) {
      const float inv = 1.f / st.l[r];
      float* o = out + (r / a.group) * a.out_stride + (r % a.group) * int64_t{dim};
      const float* src = st.acc + r * int64_t{dim};
      for (int32_t e = 0; e < dim; ++e) o[e] = src[e] * inv;
    }
  }
}

// dst[0, n) = src[0, n) as f16 (kHalf) or bf16, rounded to nearest even as quant::FloatToHalf
// and quant::FloatToBf16 round (overflow to inf; a NaN stays NaN, bf16's quiet).
template <bool kHalf>
void NarrowRowWith(const float* src, int64_t n, uint16_t* dst) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(df, src + i);
    if constexpr (kHalf) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
      // F16C's conversion (round to nearest even); other targets' emulation may not round.
      const hn::Rebind<hwy::float16_t, decltype(df)> dh;
      hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(dst + i));
#else
      break;
#endif
    } else {
      const auto x = hn::BitCast(du, v);
      const auto one = hn::Set(du, 1u);
      const auto rounded = hn::ShiftRight<16>(
          hn::Add(hn::Add(x, hn::Set(du, 0x7FFFu)), hn::And(hn::ShiftRight<16>(x), one)));
      const auto nan = hn::Gt(hn::And(x, hn::Set(du, 0x7FFFFFFFu)), hn::Set(du, 0x7F800000u));
      const auto quiet = hn::Or(hn::ShiftRight<16>(x), hn::Set(du, 0x40u));
      // Every lane is at most 0xFFFF: as int32 it demotes to uint16 unchanged.
      const hn::RebindToSigned<decltype(df)> di;
      hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, hn::IfThenElse(nan, quiet, rounded))), du16,
                 dst + i);
    }
  }
  for (; i < n; ++i) dst[i] = kHalf ? quant::FloatToHalf(src[i]) : quant::FloatToBf16(src[i]);
}

void NarrowRow(const float* src, int64_t n, bool half, uint16_t* dst) {
  if (half) return NarrowRowWith<true>(src, n, dst);
  NarrowRowWith<false>(src, n, dst);
}

template <class D>
void AttendTileOfType(D d, const TileArgs& a) {
  switch (a.kv_dtype) {
    case DType::kF16:
      return AttendTileWith<D, hwy::float16_t>(d, a);
    case DType::kBF16:
      return AttendTileWith<D, hwy::bfloat16_t>(d, a);
    default:  // f32, int8
      return AttendTileWith<D, float>(d, a);
  }
}

// Picks the widest vector that divides head_dim.
void AttendTile(const TileArgs& a) {
  const hn::ScalableTag<float> full;
  if (a.head_dim % hn::Lanes(full) == 0) return AttendTileOfType(full, a);
  const hn::CappedTag<float, 8> d8;
  if (a.head_dim % hn::Lanes(d8) == 0) return AttendTileOfType(d8, a);
  const hn::CappedTag<float, 4> d4;
  if (a.head_dim % hn::Lanes(d4) == 0) return AttendTileOfType(d4, a);
  AttendTileOfType(hn::CappedTag<float, 1>(), a);
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
HWY_EXPORT(NarrowRow);

namespace {

// Query rows (tokens x heads of a group, times the item's KV heads) per work item at most:
// bounds the scratch and keeps several items per sequence in a long prefill so both
// threads get work.
constexpr int32_t kMaxTileRows = 64;
// Work below this many multiply-adds runs on the calling thread: waking workers costs more.
constexpr int64_t kMinParallelWork = 1 << 15;

struct Item {
  int32_t seq;
  int32_t first_token;  // batch index of the tile's first query
  int32_t num_queries;
  int32_t kv_head;   // the first of the item's KV heads
  int32_t kv_heads;  // how many
  int64_t cost;      // multiply-adds, for ordering
};

// Tiles of every sequence times runs of KV heads, most expensive first. A tile with few
// rows per KV head (a decode) takes as many KV heads as fit kMaxTileRows, fewer when that
// would leave a thread without two items; a prefill tile takes one.
std::vector<Item> PlanItems(const BatchInput& batch, int32_t kv_heads, int32_t group,
                            int32_t threads) {
  const int32_t tile = std::max(1, kMaxTileRows / group);
  const auto heads_per_item = [&](int32_t n, int32_t cap) {
    return std::clamp(kMaxTileRows / (n * group), 1, cap);
  };
  const auto count = [&](int32_t cap) {
    int64_t items = 0;
    for (int32_t s = 0; s < batch.num_seqs(); ++s) {
      const int32_t begin = batch.query_start_loc[s], end = batch.query_start_loc[s + 1];
      for (int32_t i = begin; i < end; i += tile) {
        const int32_t per_item = heads_per_item(std::min(tile, end - i), cap);
        items += (kv_heads + per_item - 1) / per_item;
      }
    }
    return items;
  };
  int32_t cap = kv_heads;
  while (cap > 1 && count(cap) < 2 * threads) cap = (cap + 1) / 2;
  std::vector<Item> items;
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t begin = batch.query_start_loc[s], end = batch.query_start_loc[s + 1];
    for (int32_t i = begin; i < end; i += tile) {
      const int32_t n = std::min(tile, end - i);
      const int32_t per_item = heads_per_item(n, cap);
      for (int32_t g = 0; g < kv_heads; g += per_item) {
        const int32_t heads = std::min(per_item, kv_heads - g);
        const int64_t cost = int64_t{n} * heads * (batch.positions[i + n - 1] + 1);
        items.push_back({s, i, n, g, heads, cost});
      }
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
  if (shape.dtype == DType::kF16 || shape.dtype == DType::kBF16) {
    HWY_DYNAMIC_DISPATCH(NarrowRow)
    (src, width, shape.dtype == DType::kF16, reinterpret_cast<uint16_t*>(dst));
    return;
  }
  std::memcpy(dst, src, static_cast<size_t>(width) * sizeof(float));
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
  const std::vector<Item> items =
      PlanItems(batch, kv_heads, group, static_cast<int32_t>(pool->num_threads()));
  int64_t work = 0;
  int32_t item_rows = 0;
  for (const Item& item : items) {
    work += item.cost;
    item_rows = std::max(item_rows, item.kv_heads * item.num_queries * group);
  }
  work *= int64_t{group} * head_dim * 2;

  std::atomic<int64_t> next{0};
  const int64_t participants = work < kMinParallelWork ? 1 : pool->num_threads();
  pool->ParallelFor(participants, 1, [&](int64_t, int64_t) {
    thread_local std::vector<float> scratch;
    // The layout TileArgs::scratch describes, for the largest item, and 16 for alignment.
    const size_t need = static_cast<size_t>(item_rows) * (kChunk + head_dim + 2) +
                        static_cast<size_t>(kv_heads) * 16 +
                        static_cast<size_t>(head_dim) * kChunk * 2 + 16;
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
      a.kv_heads = it.kv_heads;
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
