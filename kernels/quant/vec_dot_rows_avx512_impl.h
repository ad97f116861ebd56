// The AVX-512 kernels of VecDotRows (vec_dot_rows.h), included by the files that compile
// them for an instruction set: vec_dot_rows_avx512.cc (AVX-512 F/BW/VL) and
// vec_dot_rows_avx512_vnni.cc (plus VNNI: PAGODA_VEC_DOT_ROWS_VNNI defined, VPDPWSSD and
// VPDPBUSD in place of VPMADDWD + VPADDD, the same integers). Two layouts, each keeping the
// AVX2 kernel's integer lanes and float operations for every row, so the single-row bits:
// - Q4_K, Q5_K, Q6_K: a 512-bit register holds two neighbouring 32-byte chunks of one row's
//   block (their activation bytes are contiguous); the halves' int32 lanes are added at the
//   end of the block into the AVX2 kernel's eight lanes (integer sums: exact in any order).
//   The weight's quants are unpacked once for up to eight rows (32 registers hold them).
// - Q8_0, Q4_0: each block's float scale is applied to its own lanes right away, so two
//   blocks cannot share a register; instead it holds the same chunk of two rows, against the
//   weight chunk in both halves.
// Everything is in an unnamed namespace: each including file keeps its own copy, compiled
// for its target. Include after <immintrin.h> under the file's `#pragma GCC target`.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstddef>

#include "kernels/quant/avx2_lanes.h"
#include "kernels/quant/quant_types.h"
#include "kernels/quant/vec_dot_avx2.h"
#include "kernels/quant/vec_dot_rows.h"
#include "kernels/quant/with_rows.h"

namespace pagoda::kernels::quant {
namespace {  // NOLINT(build/namespaces): per-file copies on purpose, see above

// The same 32 bytes of both rows: A low, B high.
inline __m512i Pair(const void* a, const void* b) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(Load32(a)), Load32(b), 1);
}

inline __m512i Both(__m256i v) { return _mm512_broadcast_i64x4(v); }

inline __m512 Scales(float a, float b) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_zextpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(a))),
                         _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

// hsum_float_8 (HorizontalSum's order) of each 256-bit half: the low half's in lane 0, the
// high half's in lane 8.
inline __m512 HalfSums(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
}

// Lanes 0 and 8 of v, to *a and *b.
inline void StoreHalves(__m512 v, float* a, float* b) {
  *a = _mm512_cvtss_f32(v);
  *b = _mm_cvtss_f32(_mm512_extractf32x4_ps(v, 2));
}

// acc + the int32 sums of scales * (pair sums of u * s): u unsigned bytes below 128 or
// |q| of a Q8_0/Q4_0 weight (at most 128), s the activation's (never -128), so the 16-bit
// pair sums never saturate and both instruction sequences give the same integers.
inline __m512i AddScaledPairs(__m512i acc, __m512i scales, __m512i u, __m512i s) {
#ifdef PAGODA_VEC_DOT_ROWS_VNNI
  return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, s), scales);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(scales, _mm512_maddubs_epi16(u, s)));
#endif
}

// The int32 sums of each 4 neighbouring products u * s (same bounds as AddScaledPairs).
inline __m512i QuadSums(__m512i u, __m512i s) {
#ifdef PAGODA_VEC_DOT_ROWS_VNNI
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
#endif
}

// The activation rows' block-i scales (Q8_K's d) side by side, lane r for row r (rows past
// R: 0): ActRows::block_d's when the caller laid them out, else gathered here.
template <int R>
inline __m256 RowScales(const uint8_t* act, size_t stride, const float* block_d, int64_t i) {
  if (block_d != nullptr) return _mm256_loadu_ps(block_d + kVecDotRows * i);
  alignas(32) float d[8] = {};
  for (int r = 0; r < R; ++r) d[r] = As<BlockQ8_K>(act + r * stride)[i].d;
  return _mm256_load_ps(d);
}

// Where the Q8_K activation rows' quants are: block i of row r at Block(i) + row(r), from
// ActRows::qs where the caller packed them (aligned), else in the blocks themselves.
struct QuantsK {
  const int8_t* base;
  int64_t block_step;
  int64_t row_step;
  QuantsK(const ActRows& act, int64_t nb) {
    if (act.qs != nullptr) {
      base = act.qs;
      block_step = kQkK;
      row_step = nb * kQkK;
    } else {
      base = As<BlockQ8_K>(act.data)->qs;
      block_step = sizeof(BlockQ8_K);
      row_step = static_cast<int64_t>(act.stride);
    }
  }
  const int8_t* Block(int64_t i) const { return base + block_step * i; }
  int64_t row(int r) const { return row_step * r; }
};

// Permutations putting lane 2p of a register in its low 256 bits, lane 2p + 1 in the high.
struct PairLanes {
  __m512i idx[4];
  PairLanes() {
    for (int p = 0; p < 4; ++p) {
      idx[p] = _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_set1_epi32(2 * p)),
                                  _mm256_set1_epi32(2 * p + 1), 1);
    }
  }
  // Scales(v[2p], v[2p + 1]) for v in the low 256 bits.
  __m512 operator()(__m512 v, int p) const { return _mm512_permutexvar_ps(idx[p], v); }
};

// Q8_0 (kNibbles false) and Q4_0 weights, `cols` weight rows `w_stride` bytes apart.
// AVX-512 has no VPSIGNB: negating the activation bytes where the weight byte is negative
// gives the same products with |q| (where q is 0 the product is 0 either way).
// With kWide the activation scales come widened, side by side (ActRows::block_d).
// With kPacked the activation quants come in pairs, biased (ActRows::qs, at `qs`): one
// aligned load per pair and block; with VNNI, VPDPBUSD of the biased bytes u = a + 128 from
// -128 * (each 4 weight quants' sum) gives the same integers as a * q (exact int32 sums).
template <int P, bool kNibbles, bool kWide, bool kPacked, typename Block>
void PairsQx_0(const uint8_t* w, size_t w_stride, int64_t cols, const uint8_t* act, size_t stride,
               const float* block_d, const int8_t* qs, int64_t n, int64_t nb, float* out,
               int64_t os) {
  const PairLanes pair_lanes;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t c = 0; c < cols; ++c) {
    const Block* x = reinterpret_cast<const Block*>(w + c * w_stride);
    __m512 acc[P];
    for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const __m256i q = SignedQuants<kNibbles>(x[i]);
      const __m512i q2 = Both(q);
#if defined(PAGODA_VEC_DOT_ROWS_VNNI)
      constexpr bool kBiased = kPacked;
#else
      constexpr bool kBiased = false;
#endif
      __m512i abs_q = _mm512_setzero_si512(), minus_bias = _mm512_setzero_si512();
      __mmask64 negative = 0;
      if constexpr (kBiased) {
        // 128 * each 4 quants' sum: maddubs pairs reach at most 2 * 128 * 128 in magnitude.
        minus_bias = _mm512_sub_epi32(_mm512_setzero_si512(), QuadSums(bias, q2));
      } else {
        abs_q = _mm512_abs_epi8(q2);
        negative = _mm512_movepi8_mask(q2);
      }
      const float xd = H(x[i].d);
      __m512 dx = _mm512_setzero_ps();
      if constexpr (kWide) {
        // xd * each row's scale: the products xd * H(d) of the other path.
        dx = _mm512_castps256_ps512(
            _mm256_mul_ps(_mm256_loadu_ps(block_d + kVecDotRows * i), _mm256_set1_ps(xd)));
      }
      for (int p = 0; p < P; ++p) {
        const BlockQ8_0& ya = As<BlockQ8_0>(act + 2 * p * stride)[i];
        const BlockQ8_0& yb = As<BlockQ8_0>(act + (2 * p + 1) * stride)[i];
        __m512i sums;
        if constexpr (kBiased) {
#if defined(PAGODA_VEC_DOT_ROWS_VNNI)
          sums = _mm512_dpbusd_epi32(minus_bias, _mm512_load_si512(qs + 2 * p * n + 64 * i), q2);
#endif
        } else {
          __m512i ys;
          if constexpr (kPacked) {
            ys = _mm512_xor_si512(_mm512_load_si512(qs + 2 * p * n + 64 * i), bias);
          } else {
            ys = Pair(ya.qs, yb.qs);
          }
          const __m512i signed_y = _mm512_mask_sub_epi8(ys, negative, _mm512_setzero_si512(), ys);
          sums = QuadSums(abs_q, signed_y);
        }
        __m512 both;
        if constexpr (kWide) {
          both = pair_lanes(dx, p);
        } else {
          both = Scales(xd * H(ya.d), xd * H(yb.d));
        }
        acc[p] = _mm512_fmadd_ps(both, _mm512_cvtepi32_ps(sums), acc[p]);
      }
    }
    for (int p = 0; p < P; ++p) {
      StoreHalves(HalfSums(acc[p]), out + 2 * p * os + c, out + (2 * p + 1) * os + c);
    }
  }
}

// Q4_K (kFifth false) and Q5_K weights, `cols` weight rows `w_stride` bytes apart, against R
// activation rows, each on its own: a 512-bit register holds sub-blocks 2j (low half, the
// low nibbles) and 2j + 1 (high half, the high nibbles), whose 64 activation bytes are
// contiguous. The two halves' int32 lanes, added at the end of the block, are the AVX2
// kernel's lanes (lane l of sub-block pairs plus lane l of the other), so the float work
// after them is RowsQxK's and the bits are the same.
// With kSums32 (Q4_K with packed quants: ActRows::qs), the min products come from the packed
// sums of 32 quants, four rows per VPMADDWD: lane t of a row is the integer the pair sums
// give (sum over sub-blocks 2t, 2t + 1 of min * quant sum), its float work the same.
template <int R, bool kFifth, bool kSums32, typename Block>
void SubBlockPairsQxK(const uint8_t* w, size_t w_stride, int64_t cols, const uint8_t* act,
                      size_t stride, const float* block_d, const QuantsK& quants,
                      const int16_t* sums32, int64_t nb, float* out, int64_t os) {
  static_assert(!(kSums32 && kFifth));
  constexpr int U = (R + 3) / 4;  // groups of four rows
  // Words 0, 2, .., 14 of a 256-bit register in every 128-bit lane (ScalesMinsK4::mins16
  // holds min t in word 2t); lane 4u + w / 4 of a row vector in lane w.
  alignas(64) int16_t even_idx[32];
  for (int w = 0; w < 32; ++w) even_idx[w] = static_cast<int16_t>(2 * (w % 8));
  [[maybe_unused]] const __m512i even_words = _mm512_load_si512(even_idx);
  [[maybe_unused]] __m512i quad_lanes[U];
  for (int u = 0; u < U; ++u) {
    alignas(64) int32_t idx[16];
    for (int l = 0; l < 16; ++l) idx[l] = 4 * u + l / 4;
    quad_lanes[u] = _mm512_load_si512(idx);
  }
  const PairLanes pair_lanes;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i one = _mm512_set1_epi8(1);
  // Word 2j of the scales in the low 256 bits, word 2j + 1 in the high ones.
  __m512i pick[4];
  for (int j = 0; j < 4; ++j) {
    pick[j] = _mm512_inserti64x4(_mm512_zextsi256_si512(WordBroadcast(2 * j, 2 * j)),
                                 WordBroadcast(2 * j + 1, 2 * j + 1), 1);
  }
  const __m512i fifth_shift = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(1), 1);
  // The float work after each block runs for two rows at once: rows 2p and 2p + 1 share
  // register p, row 2p in the low half. Q4_K's four min accumulators of a row sit in its
  // half's even lanes (the odd ones take values never read). An odd last row has its own.
  constexpr int P = R / 2;
  for (int64_t c = 0; c < cols; ++c) {
    const Block* x = reinterpret_cast<const Block*>(w + c * w_stride);
    __m512 acc[P + 1];
    __m512 acc_m[P + 1];
    // kSums32: row 4u + v's four min accumulators in lanes 4v .. 4v + 3 of acc_q[u].
    [[maybe_unused]] __m512 acc_q[U];
    float summs[R];
    for (int p = 0; p <= P; ++p) acc[p] = acc_m[p] = _mm512_setzero_ps();
    for (int u = 0; u < U; ++u) acc_q[u] = _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) summs[r] = 0;
    for (int64_t i = 0; i < nb; ++i) {
      const int8_t* y = quants.Block(i);
      const ScalesMinsK4 sm = UnpackScalesMinsK4(x[i].scales);
      const __m512i scales = _mm512_broadcast_i32x4(_mm256_castsi256_si128(sm.scales16));
      __m512i hbits = _mm512_setzero_si512();
      if constexpr (kFifth) hbits = _mm512_srlv_epi16(Both(Load32(x[i].qh)), fifth_shift);
      __m512i sumi[R];
      for (int r = 0; r < R; ++r) sumi[r] = _mm512_setzero_si512();
      for (int j = 0; j < 4; ++j) {
        const __m256i bits = Load32(x[i].qs + 32 * j);
        __m512i q = _mm512_and_si512(
            _mm512_inserti64x4(_mm512_zextsi256_si512(bits), _mm256_srli_epi16(bits, 4), 1),
            low4);
        if constexpr (kFifth) {
          q = _mm512_or_si512(
              q, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hbits, 2 * j), one), 4));
        }
        const __m512i s = _mm512_shuffle_epi8(scales, pick[j]);
        for (int r = 0; r < R; ++r) {
          sumi[r] = AddScaledPairs(sumi[r], s, q, _mm512_loadu_si512(y + quants.row(r) + 64 * j));
        }
      }
      const float xd = H(x[i].d), xdmin = H(x[i].dmin);
      // Every row's a.d * xd and -a.d * xdmin (the same products as one row's).
      const __m256 ad = RowScales<R>(act, stride, block_d, i);
      const __m512 dx = _mm512_castps256_ps512(_mm256_mul_ps(ad, _mm256_set1_ps(xd)));
      const __m512 dm = _mm512_castps256_ps512(_mm256_mul_ps(ad, _mm256_set1_ps(-xdmin)));
      if constexpr (kSums32) {
        const __m512i mins = _mm512_permutexvar_epi16(even_words, _mm512_castsi256_si512(sm.mins16));
        for (int u = 0; u < U; ++u) {
          const __m512i prod =
              _mm512_madd_epi16(_mm512_load_si512(sums32 + 32 * (u * nb + i)), mins);
          acc_q[u] = _mm512_fmadd_ps(_mm512_permutexvar_ps(quad_lanes[u], dm),
                                     _mm512_cvtepi32_ps(prod), acc_q[u]);
        }
      }
      for (int p = 0; p < P; ++p) {
        const BlockQ8_K& a = As<BlockQ8_K>(act + 2 * p * stride)[i];
        const BlockQ8_K& b = As<BlockQ8_K>(act + (2 * p + 1) * stride)[i];
        // Each row's eight lanes: its low 256 bits plus its high ones.
        const __m512i lows = _mm512_shuffle_i64x2(sumi[2 * p], sumi[2 * p + 1], 0x44);
        const __m512i highs = _mm512_shuffle_i64x2(sumi[2 * p], sumi[2 * p + 1], 0xEE);
        acc[p] = _mm512_fmadd_ps(pair_lanes(dx, p),
                                 _mm512_cvtepi32_ps(_mm512_add_epi32(lows, highs)), acc[p]);
        if constexpr (kFifth) {
          for (int h = 0; h < 2; ++h) {
            const BlockQ8_K& y = h == 0 ? a : b;
            const __m128i prod = MinProducts4(y, sm.mins16);
            const int total = (_mm_extract_epi32(prod, 0) + _mm_extract_epi32(prod, 1)) +
                              (_mm_extract_epi32(prod, 2) + _mm_extract_epi32(prod, 3));
            summs[2 * p + h] = std::fma(-y.d * xdmin, static_cast<float>(total), summs[2 * p + h]);
          }
        } else if constexpr (!kSums32) {
          // MinProducts4 of both rows: lane 2k of a row's half is its lane k.
          const __m512i m = _mm512_madd_epi16(Pair(a.bsums, b.bsums), Both(sm.mins16));
          const __m512i prod = _mm512_add_epi32(m, _mm512_srli_epi64(m, 32));
          acc_m[p] = _mm512_fmadd_ps(pair_lanes(dm, p), _mm512_cvtepi32_ps(prod), acc_m[p]);
        }
      }
      if constexpr (R % 2 == 1) {
        const BlockQ8_K& b = As<BlockQ8_K>(act + (R - 1) * stride)[i];
        const float dmin = -b.d * xdmin;
        const __m128i prod = MinProducts4(b, sm.mins16);
        if constexpr (kFifth) {
          const int total = (_mm_extract_epi32(prod, 0) + _mm_extract_epi32(prod, 1)) +
                            (_mm_extract_epi32(prod, 2) + _mm_extract_epi32(prod, 3));
          summs[R - 1] = std::fma(dmin, static_cast<float>(total), summs[R - 1]);
        } else if constexpr (!kSums32) {
          acc_m[P] = _mm512_castps128_ps512(_mm_fmadd_ps(
              _mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), _mm512_castps512_ps128(acc_m[P])));
        }
        const __m256i s256 = _mm256_add_epi32(_mm512_castsi512_si256(sumi[R - 1]),
                                              _mm512_extracti64x4_epi64(sumi[R - 1], 1));
        acc[P] = _mm512_castps256_ps512(_mm256_fmadd_ps(
            _mm256_set1_ps(b.d * xd), _mm256_cvtepi32_ps(s256), _mm512_castps512_ps256(acc[P])));
      }
    }
    // Each row's eight lanes summed as RowsQxK ends, plus (Q4_K) its four min accumulators:
    // paired rows keep min k in lane 2k of their half, (m0 + m2) + (m1 + m3) in lane 0.
    // kSums32: row 4u + v's (m0 + m2) + (m1 + m3) at mins_total[16u + 4v].
    [[maybe_unused]] alignas(64) float mins_total[16 * U];
    if constexpr (kSums32) {
      for (int u = 0; u < U; ++u) {
        __m512 m = acc_q[u];
        m = _mm512_add_ps(m, _mm512_permute_ps(m, _MM_SHUFFLE(1, 0, 3, 2)));
        m = _mm512_add_ps(m, _mm512_permute_ps(m, _MM_SHUFFLE(2, 3, 0, 1)));
        _mm512_store_ps(mins_total + 16 * u, m);
      }
    }
    auto row_mins = [&](int r) { return mins_total[16 * (r / 4) + 4 * (r % 4)]; };
    for (int p = 0; p < P; ++p) {
      __m512 sum = HalfSums(acc[p]);
      if constexpr (!kFifth && !kSums32) {
        __m512 m = acc_m[p];
        m = _mm512_add_ps(m, _mm512_shuffle_f32x4(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
        m = _mm512_add_ps(m, _mm512_permute_ps(m, _MM_SHUFFLE(1, 0, 3, 2)));
        sum = _mm512_add_ps(sum, m);
      }
      float* a = out + 2 * p * os + c;
      float* b = out + (2 * p + 1) * os + c;
      StoreHalves(sum, a, b);
      if constexpr (kFifth) {
        *a += summs[2 * p];
        *b += summs[2 * p + 1];
      } else if constexpr (kSums32) {
        *a += row_mins(2 * p);
        *b += row_mins(2 * p + 1);
      }
    }
    if constexpr (R % 2 == 1) {
      // The odd row's four min accumulators in lanes 0..3: (m0 + m2) + (m1 + m3).
      const float sum = _mm512_cvtss_f32(HalfSums(acc[P]));
      float* o = out + (R - 1) * os + c;
      if constexpr (kFifth) {
        *o = sum + summs[R - 1];
      } else if constexpr (kSums32) {
        *o = sum + row_mins(R - 1);
      } else {
        __m128 m = _mm512_castps512_ps128(acc_m[P]);
        m = _mm_add_ps(m, _mm_permute_ps(m, _MM_SHUFFLE(1, 0, 3, 2)));
        m = _mm_add_ps(m, _mm_permute_ps(m, _MM_SHUFFLE(2, 3, 0, 1)));
        *o = sum + _mm_cvtss_f32(m);
      }
    }
  }
}

// Q6_K weights, `cols` weight rows `w_stride` bytes apart, against R activation rows, each
// on its own: a 512-bit register holds 32-element
// chunks k and k + 1 of a half (contiguous activation bytes); the halves' int32 lanes, added
// at the end of the block, are RowsQ6_K's lanes, and the float work after them is its own.
template <int R>
void ChunkPairsQ6_K(const uint8_t* w, size_t w_stride, int64_t cols, const uint8_t* act,
                    size_t stride, const float* block_d, const QuantsK& quants, int64_t nb,
                    float* out, int64_t os) {
  const PairLanes pair_lanes;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i three = _mm512_set1_epi8(3);
  // Pair p of the block (half p / 2, chunks 2 (p % 2) and 2 (p % 2) + 1) scales its 128-bit
  // lanes by scales 4p .. 4p + 3.
  __m512i pick[4];
  for (int p = 0; p < 4; ++p) {
    alignas(64) int16_t idx[32];
    for (int w = 0; w < 32; ++w) idx[w] = static_cast<int16_t>(4 * p + w / 8);
    pick[p] = _mm512_load_si512(idx);
  }
  // The 2-bit high parts of chunks (0, 1), then (2, 3), of a half.
  const __m512i shift01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i shift23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
  for (int64_t c = 0; c < cols; ++c) {
    const BlockQ6_K* x = reinterpret_cast<const BlockQ6_K*>(w + c * w_stride);
    // Rows 2p and 2p + 1 share float register p after each block (row 2p low); an odd last
    // row has its own.
    __m512 acc[R / 2 + 1];
    for (int p = 0; p <= R / 2; ++p) acc[p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const int8_t* y = quants.Block(i);
      const __m256i scales16 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
      const __m512i scales512 = _mm512_zextsi256_si512(scales16);
      __m512i sumi[R];
      for (int r = 0; r < R; ++r) sumi[r] = _mm512_setzero_si512();
      for (int j = 0; j < 2; ++j) {
        const __m512i ql = _mm512_loadu_si512(x[i].ql + 64 * j);
        const __m512i qh = Both(Load32(x[i].qh + 32 * j));
        const __m512i q[2] = {
            _mm512_or_si512(
                _mm512_and_si512(ql, low4),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift01), three), 4)),
            _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift23), three), 4))};
        for (int h = 0; h < 2; ++h) {
          const __m512i scales = _mm512_permutexvar_epi16(pick[2 * j + h], scales512);
          for (int r = 0; r < R; ++r) {
            const int8_t* yq = y + quants.row(r) + 128 * j + 64 * h;
            sumi[r] = AddScaledPairs(sumi[r], scales, q[h], _mm512_loadu_si512(yq));
          }
        }
      }
      const float xd = H(x[i].d);
      const __m512 dx = _mm512_castps256_ps512(
          _mm256_mul_ps(RowScales<R>(act, stride, block_d, i), _mm256_set1_ps(xd)));
      for (int p = 0; p < R / 2; ++p) {
        const BlockQ8_K& a = As<BlockQ8_K>(act + 2 * p * stride)[i];
        const BlockQ8_K& b = As<BlockQ8_K>(act + (2 * p + 1) * stride)[i];
        // Both rows' eight lanes (row 2p low): low 256 bits plus high ones, less the bias.
        const __m512i lows = _mm512_shuffle_i64x2(sumi[2 * p], sumi[2 * p + 1], 0x44);
        const __m512i highs = _mm512_shuffle_i64x2(sumi[2 * p], sumi[2 * p + 1], 0xEE);
        const __m512i low_bias =
            _mm512_slli_epi32(_mm512_madd_epi16(Pair(a.bsums, b.bsums), Both(scales16)), 5);
        const __m512i sums = _mm512_sub_epi32(_mm512_add_epi32(lows, highs), low_bias);
        acc[p] = _mm512_fmadd_ps(pair_lanes(dx, p), _mm512_cvtepi32_ps(sums), acc[p]);
      }
      if constexpr (R % 2 == 1) {
        const BlockQ8_K& b = As<BlockQ8_K>(act + (R - 1) * stride)[i];
        const __m256i low_bias = _mm256_slli_epi32(_mm256_madd_epi16(Load32(b.bsums), scales16), 5);
        const __m256i s256 = _mm256_add_epi32(_mm512_castsi512_si256(sumi[R - 1]),
                                              _mm512_extracti64x4_epi64(sumi[R - 1], 1));
        acc[R / 2] = _mm512_castps256_ps512(_mm256_fmadd_ps(
            _mm256_set1_ps(b.d * xd), _mm256_cvtepi32_ps(_mm256_sub_epi32(s256, low_bias)),
            _mm512_castps512_ps256(acc[R / 2])));
      }
    }
    for (int p = 0; p < R / 2; ++p) {
      StoreHalves(HalfSums(acc[p]), out + 2 * p * os + c, out + (2 * p + 1) * os + c);
    }
    if constexpr (R % 2 == 1) out[(R - 1) * os + c] = _mm512_cvtss_f32(HalfSums(acc[R / 2]));
  }
}

void ChunkPairsQ6_K(const WeightRows& w, const ActRows& act, int64_t nb, float* out,
                    int64_t os) {
  const auto* wr = static_cast<const uint8_t*>(w.data);
  const auto* a = static_cast<const uint8_t*>(act.data);
  WithRows(act.rows, [&]<int R>() {
    ChunkPairsQ6_K<R>(wr, w.stride, w.rows, a, act.stride, act.block_d, QuantsK(act, nb), nb,
                      out, os);
  });
}

template <bool kFifth, typename Block>
void SubBlockPairsQxK(const WeightRows& w, const ActRows& act, int64_t nb, float* out,
                      int64_t os) {
  const auto* wr = static_cast<const uint8_t*>(w.data);
  const auto* a = static_cast<const uint8_t*>(act.data);
  const QuantsK quants(act, nb);
  if constexpr (!kFifth) {
    if (act.qs != nullptr) {
      // The packed sums of 32 quants after the quants (ActRows::qs).
      const auto* sums32 = reinterpret_cast<const int16_t*>(act.qs + kVecDotRows * nb * kQkK);
      WithRows(act.rows, [&]<int R>() {
        SubBlockPairsQxK<R, false, true, Block>(wr, w.stride, w.rows, a, act.stride, act.block_d,
                                                quants, sums32, nb, out, os);
      });
      return;
    }
  }
  WithRows(act.rows, [&]<int R>() {
    SubBlockPairsQxK<R, kFifth, false, Block>(wr, w.stride, w.rows, a, act.stride, act.block_d,
                                              quants, nullptr, nb, out, os);
  });
}

template <int P, bool kNibbles, typename Block>
void PairsQx_0(const WeightRows& w, const ActRows& act, int64_t nb, float* out, int64_t os) {
  const auto* wr = static_cast<const uint8_t*>(w.data);
  const auto* a = static_cast<const uint8_t*>(act.data);
  const int64_t n = nb * kQk;
  if (act.block_d != nullptr && act.qs != nullptr) {
    PairsQx_0<P, kNibbles, true, true, Block>(wr, w.stride, w.rows, a, act.stride, act.block_d,
                                              act.qs, n, nb, out, os);
  } else if (act.block_d != nullptr) {
    PairsQx_0<P, kNibbles, true, false, Block>(wr, w.stride, w.rows, a, act.stride, act.block_d,
                                               nullptr, n, nb, out, os);
  } else {
    PairsQx_0<P, kNibbles, false, false, Block>(wr, w.stride, w.rows, a, act.stride, nullptr,
                                                nullptr, n, nb, out, os);
  }
}

// Rows 0 .. 2P - 1 of `act`.
template <int P>
bool Pairs(DType type, int64_t nb, const WeightRows& w, const ActRows& act, float* out,
           int64_t os) {
  switch (type) {
    case DType::kQ4_0:
      PairsQx_0<P, true, BlockQ4_0>(w, act, nb, out, os);
      return true;
    case DType::kQ8_0:
      PairsQx_0<P, false, BlockQ8_0>(w, act, nb, out, os);
      return true;
    default:
      return false;
  }
}

// VecDotRowsAvx512's contract, with this file's instruction set.
inline bool RowsAvx512(DType weight_type, int64_t n, const WeightRows& w, const ActRows& act,
                       float* out, int64_t out_stride) {
  const int rows = act.rows;
  if (rows < 1 || rows > kVecDotRows) return false;
  const int64_t nb = n / DTypeBlockElems(weight_type);
  const auto* a = static_cast<const uint8_t*>(act.data);
  if (weight_type == DType::kQ4_K) {
    SubBlockPairsQxK<false, BlockQ4_K>(w, act, nb, out, out_stride);
    return true;
  }
  if (weight_type == DType::kQ5_K) {
    SubBlockPairsQxK<true, BlockQ5_K>(w, act, nb, out, out_stride);
    return true;
  }
  if (weight_type == DType::kQ6_K) {
    ChunkPairsQ6_K(w, act, nb, out, out_stride);
    return true;
  }
  if (weight_type != DType::kQ4_0 && weight_type != DType::kQ8_0) return false;
  if (rows >= 2) {
    WithRows(rows / 2, [&]<int P>() { Pairs<P>(weight_type, nb, w, act, out, out_stride); });
  }
  const int r = rows & ~1;
  if (r == rows) return true;
  // An odd row: the AVX2 kernel (same bits).
  ActRows last = act;
  last.data = a + r * act.stride;
  last.rows = 1;
  if (act.scales != nullptr) last.scales = act.scales + r * act.scale_stride;
  return VecDotRowsAvx2(weight_type, n, w, last, out + r * out_stride, out_stride);
}

}  // namespace
}  // namespace pagoda::kernels::quant
