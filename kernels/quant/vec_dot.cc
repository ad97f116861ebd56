#include "kernels/quant/vec_dot.h"

#include <cmath>
#include <cstring>

#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"

// Hot loops: every helper is inlined into VecDot, which is compiled for AVX2 (x86-64-v3)
// and for the baseline and picked at run time (target_clones). The file is built with
// -ffp-contract=off and the float accumulation stays sequential, so both versions give
// the same bits: only the exact integer sums are vectorized.
#define PAGODA_HOT [[gnu::always_inline]] inline

namespace pagoda::kernels::quant {
namespace {

// binary16 -> float for every bit pattern (exact; faster than converting in the loop).
const float* HalfTable() {
  static const float* table = [] {
    auto* t = new float[65536];
    for (uint32_t h = 0; h < 65536; ++h) t[h] = HalfToFloat(static_cast<uint16_t>(h));
    return t;
  }();
  return table;
}

// binary16 bits -> float through the table.
PAGODA_HOT float H(uint16_t h) { return HalfTable()[h]; }

PAGODA_HOT uint32_t LoadQh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

// The 32-element formats follow ggml's x86 AVX2 kernels, which llama.cpp runs on x86
// (the generic code adds the blocks in one float instead): lane l (0..7) of a block is the
// exact integer sum over its elements 4l..4l+3; each lane accumulates scale * sum with a
// fused multiply-add across blocks; the lanes are then added as hsum_float_8 does, and
// the Q4_1/Q5_1 min terms, summed apart, come last.
struct Lanes {
  float acc[8] = {};
  // acc[l] = fma(scale, sum of q[4l..4l+3] * y[4l..4l+3], acc[l]).
  PAGODA_HOT void Add(float scale, const int8_t* q, const int8_t* y) {
    for (int l = 0; l < 8; ++l) {
      const int s = q[4 * l] * y[4 * l] + q[4 * l + 1] * y[4 * l + 1] +
                    q[4 * l + 2] * y[4 * l + 2] + q[4 * l + 3] * y[4 * l + 3];
      acc[l] = std::fma(scale, static_cast<float>(s), acc[l]);
    }
  }
  // hsum_float_8: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
  PAGODA_HOT float Sum() const {
    return ((acc[4] + acc[0]) + (acc[6] + acc[2])) + ((acc[5] + acc[1]) + (acc[7] + acc[3]));
  }
};

// Element j of a Q4/Q5 block's nibbles: low nibbles are elements 0..15, high 16..31.
PAGODA_HOT void Nibbles(const uint8_t* qs, int offset, int8_t* q) {
  for (int j = 0; j < kQk / 2; ++j) {
    q[j] = static_cast<int8_t>((qs[j] & 0x0F) - offset);
    q[j + kQk / 2] = static_cast<int8_t>((qs[j] >> 4) - offset);
  }
}

// Adds the fifth bits of a Q5 block (bit j of qh is element j's bit 4).
PAGODA_HOT void FifthBits(const uint8_t* qh_bytes, int8_t* q) {
  const uint32_t qh = LoadQh(qh_bytes);
  for (int j = 0; j < kQk; ++j) q[j] = static_cast<int8_t>(q[j] + (((qh >> j) & 1) << 4));
}

PAGODA_HOT float DotQ4_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb) {
  Lanes lanes;
  int8_t q[kQk];
  for (int64_t ib = 0; ib < nb; ++ib) {
    Nibbles(x[ib].qs, 8, q);
    lanes.Add(H(x[ib].d) * H(y[ib].d), q, y[ib].qs);
  }
  return lanes.Sum();
}

PAGODA_HOT float DotQ4_1(const BlockQ4_1* x, const BlockQ8_1* y, int64_t nb) {
  Lanes lanes;
  float summs = 0;
  int8_t q[kQk];
  for (int64_t ib = 0; ib < nb; ++ib) {
    summs += H(x[ib].m) * H(y[ib].s);
    Nibbles(x[ib].qs, 0, q);
    lanes.Add(H(x[ib].d) * H(y[ib].d), q, y[ib].qs);
  }
  return lanes.Sum() + summs;
}

PAGODA_HOT float DotQ5_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t nb) {
  Lanes lanes;
  int8_t q[kQk];
  for (int64_t ib = 0; ib < nb; ++ib) {
    Nibbles(x[ib].qs, 0, q);
    FifthBits(x[ib].qh, q);
    for (int j = 0; j < kQk; ++j) q[j] = static_cast<int8_t>(q[j] - 16);
    lanes.Add(H(x[ib].d) * H(y[ib].d), q, y[ib].qs);
  }
  return lanes.Sum();
}

PAGODA_HOT float DotQ5_1(const BlockQ5_1* x, const BlockQ8_1* y, int64_t nb) {
  Lanes lanes;
  float summs = 0;
  int8_t q[kQk];
  for (int64_t ib = 0; ib < nb; ++ib) {
    summs += H(x[ib].m) * H(y[ib].s);
    Nibbles(x[ib].qs, 0, q);
    FifthBits(x[ib].qh, q);
    lanes.Add(H(x[ib].d) * H(y[ib].d), q, y[ib].qs);
  }
  return lanes.Sum() + summs;
}

PAGODA_HOT float DotQ8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb) {
  Lanes lanes;
  for (int64_t ib = 0; ib < nb; ++ib) lanes.Add(H(x[ib].d) * H(y[ib].d), x[ib].qs, y[ib].qs);
  return lanes.Sum();
}

PAGODA_HOT float DotQ2_K(const BlockQ2_K* x, const BlockQ8_K* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const uint8_t* sc = x[i].scales;
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
    const float dall = y[i].d * H(x[i].d);
    const float dmin = y[i].d * H(x[i].dmin);
    int isum = 0, is = 0;
    for (int k = 0; k < kQkK / 128; ++k, q2 += 32) {
      for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
        int d = sc[is++] & 0xF;
        int isuml = 0;
        for (int l = 0; l < 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
        isum += d * isuml;
        d = sc[is++] & 0xF;
        isuml = 0;
        for (int l = 16; l < 32; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
        isum += d * isuml;
      }
    }
    sumf += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sumf;
}

// The K formats below all end like ggml's generic code: per super-block, integer sums of
// 8 lanes (element l of every group of 8 goes to lane l), scaled into 8 float lane sums
// that are added at the end.
PAGODA_HOT void AddLanes(const int8_t* a, const int8_t* q8, const int* group_scale, int group_size,
              int32_t* aux32) {
  for (int g = 0; g < kQkK / group_size; ++g) {
    for (int k = 0; k < group_size; k += 8) {
      for (int l = 0; l < 8; ++l) {
        const int16_t p = static_cast<int16_t>(q8[l] * a[l]);
        aux32[l] += group_scale[g] * p;
      }
      q8 += 8;
      a += 8;
    }
  }
}

PAGODA_HOT float DotQ3_K(const BlockQ3_K* x, const BlockQ8_K* y, int64_t nb) {
  float sums[8] = {};
  for (int64_t i = 0; i < nb; ++i) {
    int8_t aux8[kQkK];
    const uint8_t* q3 = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    int8_t* a = aux8;
    uint8_t m = 1;
    for (int j = 0; j < kQkK; j += 128, q3 += 32) {
      for (int shift = 0; shift < 8; shift += 2, a += 32, m = static_cast<uint8_t>(m << 1)) {
        for (int l = 0; l < 32; ++l) {
          a[l] = static_cast<int8_t>(((q3[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
      }
    }
    int8_t scales[16];
    UnpackQ3KScales(x[i].scales, scales);
    int group_scale[16];
    for (int j = 0; j < 16; ++j) group_scale[j] = scales[j];
    int32_t aux32[8] = {};
    AddLanes(aux8, y[i].qs, group_scale, 16, aux32);
    const float d = H(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
  }
  float sumf = 0;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// Q4_K and Q5_K: quants in aux8 (from `unpack`), 6-bit scales and mins.
template <typename Block, typename Unpack>
PAGODA_HOT float DotK4(const Block* x, const BlockQ8_K* y, int64_t nb, Unpack unpack) {
  float sums[8] = {};
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t aux8[kQkK];
    unpack(x[i], aux8);
    int group_scale[8];
    int sumi = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      ScaleMinK4(j, x[i].scales, &sc, &m);
      group_scale[j] = sc;
      sumi += (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]) * m;
    }
    int32_t aux32[8] = {};
    AddLanes(aux8, y[i].qs, group_scale, 32, aux32);
    const float d = H(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
    const float dmin = H(x[i].dmin) * y[i].d;
    sumf -= dmin * static_cast<float>(sumi);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

PAGODA_HOT void UnpackQ4_K(const BlockQ4_K& b, int8_t* a) {
  const uint8_t* q4 = b.qs;
  for (int j = 0; j < kQkK / 64; ++j, q4 += 32, a += 64) {
    for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(q4[l] & 0xF);
    for (int l = 0; l < 32; ++l) a[l + 32] = static_cast<int8_t>(q4[l] >> 4);
  }
}

PAGODA_HOT void UnpackQ5_K(const BlockQ5_K& b, int8_t* a) {
  const uint8_t* q4 = b.qs;
  uint8_t m = 1;
  for (int j = 0; j < kQkK / 64; ++j, q4 += 32, a += 64) {
    for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>((q4[l] & 0xF) + (b.qh[l] & m ? 16 : 0));
    m = static_cast<uint8_t>(m << 1);
    for (int l = 0; l < 32; ++l) a[l + 32] = static_cast<int8_t>((q4[l] >> 4) + (b.qh[l] & m ? 16 : 0));
    m = static_cast<uint8_t>(m << 1);
  }
}

PAGODA_HOT float DotQ6_K(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb) {
  float sums[8] = {};
  for (int64_t i = 0; i < nb; ++i) {
    int8_t aux8[kQkK];
    const uint8_t* q4 = x[i].ql;
    const uint8_t* qh = x[i].qh;
    int8_t* a = aux8;
    for (int j = 0; j < kQkK; j += 128, a += 128, q4 += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        a[l] = static_cast<int8_t>(((q4[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        a[l + 32] = static_cast<int8_t>(((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        a[l + 64] = static_cast<int8_t>(((q4[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        a[l + 96] = static_cast<int8_t>(((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
    int group_scale[16];
    for (int j = 0; j < 16; ++j) group_scale[j] = x[i].scales[j];
    int32_t aux32[8] = {};
    AddLanes(aux8, y[i].qs, group_scale, 16, aux32);
    const float d = H(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
  }
  float sumf = 0;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// 8-float vector helpers for the 16-bit dot products below (ggml's AVX2 code, lane by lane).
struct Vec8 {
  float v[8] = {};
};

// ggml's AVX2 ggml_vec_dot_f16: four 8-lane accumulators over steps of 32 (fused
// multiply-add), reduced (s0 + s2) + (s1 + s3), then lanes (l + l+4) and hadd twice; the
// remaining n % 32 products are added in double.
PAGODA_HOT float DotF16(const uint16_t* x, const uint16_t* y, int64_t n) {
  const int64_t np = n & ~int64_t{31};
  Vec8 sum[4];
  for (int64_t i = 0; i < np; i += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) {
        const int64_t k = i + 8 * j + l;
        sum[j].v[l] = std::fma(H(x[k]), H(y[k]), sum[j].v[l]);
      }
    }
  }
  for (int l = 0; l < 8; ++l) {
    sum[0].v[l] += sum[2].v[l];
    sum[1].v[l] += sum[3].v[l];
  }
  for (int l = 0; l < 8; ++l) sum[0].v[l] += sum[1].v[l];
  float t0[4];
  for (int l = 0; l < 4; ++l) t0[l] = sum[0].v[l] + sum[0].v[l + 4];
  const float h0 = t0[0] + t0[1], h1 = t0[2] + t0[3];
  double sumf = h0 + h1;
  for (int64_t k = np; k < n; ++k) sumf += static_cast<double>(H(x[k]) * H(y[k]));
  return static_cast<float>(sumf);
}

// ggml's AVX2 ggml_vec_dot_bf16: four 8-lane accumulators over steps of 32 (multiply, then
// add), reduced (c1 + c3) + (c2 + c4) and as hsum_float_8; the rest added in double.
PAGODA_HOT float DotBf16(const uint16_t* x, const uint16_t* y, int64_t n) {
  Vec8 c[4];
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) {
        const int64_t k = i + 8 * j + l;
        const float p = Bf16ToFloat(x[k]) * Bf16ToFloat(y[k]);
        c[j].v[l] = p + c[j].v[l];
      }
    }
  }
  float r[8];
  for (int l = 0; l < 8; ++l) r[l] = (c[0].v[l] + c[2].v[l]) + (c[1].v[l] + c[3].v[l]);
  double sumf = ((r[4] + r[0]) + (r[6] + r[2])) + ((r[5] + r[1]) + (r[7] + r[3]));
  for (; i < n; ++i) sumf += static_cast<double>(Bf16ToFloat(x[i]) * Bf16ToFloat(y[i]));
  return static_cast<float>(sumf);
}

PAGODA_HOT float DotF32(const float* w, const float* a, int64_t n) {
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += static_cast<double>(w[k] * a[k]);
  return static_cast<float>(sum);
}

template <typename Block>
PAGODA_HOT const Block* As(const void* p) {
  return static_cast<const Block*>(p);
}

}  // namespace

[[gnu::target_clones("arch=x86-64-v3", "default")]] float VecDot(DType weight_type, int64_t n,
                                                                   const void* w, const void* act) {
  const int64_t nb = n / DTypeBlockElems(weight_type);
  switch (weight_type) {
    case DType::kF32:
      return DotF32(As<float>(w), As<float>(act), n);
    case DType::kF16:
    case DType::kBF16:
      return weight_type == DType::kF16 ? DotF16(As<uint16_t>(w), As<uint16_t>(act), n)
                                        : DotBf16(As<uint16_t>(w), As<uint16_t>(act), n);
    case DType::kQ4_0:
      return DotQ4_0(As<BlockQ4_0>(w), As<BlockQ8_0>(act), nb);
    case DType::kQ4_1:
      return DotQ4_1(As<BlockQ4_1>(w), As<BlockQ8_1>(act), nb);
    case DType::kQ5_0:
      return DotQ5_0(As<BlockQ5_0>(w), As<BlockQ8_0>(act), nb);
    case DType::kQ5_1:
      return DotQ5_1(As<BlockQ5_1>(w), As<BlockQ8_1>(act), nb);
    case DType::kQ8_0:
      return DotQ8_0(As<BlockQ8_0>(w), As<BlockQ8_0>(act), nb);
    case DType::kQ2_K:
      return DotQ2_K(As<BlockQ2_K>(w), As<BlockQ8_K>(act), nb);
    case DType::kQ3_K:
      return DotQ3_K(As<BlockQ3_K>(w), As<BlockQ8_K>(act), nb);
    case DType::kQ4_K:
      return DotK4(As<BlockQ4_K>(w), As<BlockQ8_K>(act), nb, UnpackQ4_K);
    case DType::kQ5_K:
      return DotK4(As<BlockQ5_K>(w), As<BlockQ8_K>(act), nb, UnpackQ5_K);
    case DType::kQ6_K:
      return DotQ6_K(As<BlockQ6_K>(w), As<BlockQ8_K>(act), nb);
    case DType::kQ8_1:
    case DType::kQ8_K:
      break;  // activation-only formats are never weights
  }
  return 0.f;
}

}  // namespace pagoda::kernels::quant
