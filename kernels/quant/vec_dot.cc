#include "kernels/quant/vec_dot.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"
#include "kernels/quant/vec_dot_avx2.h"
#include "kernels/quant/vec_dot_rows.h"

// The portable definitions of the dot products. VecDot runs the AVX2 versions
// (vec_dot_avx2.cc) where the CPU has AVX2 and they cover the type; they give the same
// bits. The file is built with -ffp-contract=off: every fused multiply-add is explicit.
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

// The K formats follow ggml's x86 AVX2 kernels too. Per super-block, lane u (0..7)
// of an exact integer accumulator collects, for each 32-element chunk, the chunk's scale
// times the sum over the chunk's elements 4u..4u+3 (16-element groups: lanes 0..3 use the
// first group's scale, 4..7 the second's); then acc[u] = fma(d, lane u, acc[u]).

// Adds one 32-element chunk of quants q (values as the kernels hold them) times y.
PAGODA_HOT void AddChunk(const int* q, const int8_t* y, int scale_lo, int scale_hi, int32_t* sumi) {
  for (int u = 0; u < 8; ++u) {
    const int s = q[4 * u] * y[4 * u] + q[4 * u + 1] * y[4 * u + 1] + q[4 * u + 2] * y[4 * u + 2] +
                  q[4 * u + 3] * y[4 * u + 3];
    sumi[u] += (u < 4 ? scale_lo : scale_hi) * s;
  }
}

PAGODA_HOT void FmaLanes(float d, const int32_t* sumi, Lanes* acc) {
  for (int u = 0; u < 8; ++u) acc->acc[u] = std::fma(d, static_cast<float>(sumi[u]), acc->acc[u]);
}

PAGODA_HOT float DotQ2_K(const BlockQ2_K* x, const BlockQ8_K* y, int64_t nb) {
  Lanes acc;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * H(x[i].d);
    const float dmin = -y[i].d * H(x[i].dmin);
    const uint8_t* sc = x[i].scales;
    int32_t mins[8];
    for (int u = 0; u < 8; ++u) {
      mins[u] = (sc[2 * u] >> 4) * y[i].bsums[2 * u] + (sc[2 * u + 1] >> 4) * y[i].bsums[2 * u + 1];
    }
    FmaLanes(dmin, mins, &acc);
    int32_t sumi[8] = {};
    int q[32];
    for (int j = 0; j < 2; ++j) {
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) q[l] = (x[i].qs[32 * j + l] >> (2 * k)) & 3;
        const int g = 8 * j + 2 * k;
        AddChunk(q, y[i].qs + 128 * j + 32 * k, sc[g] & 0xF, sc[g + 1] & 0xF, sumi);
      }
    }
    FmaLanes(d, sumi, &acc);
  }
  return acc.Sum();
}

PAGODA_HOT float DotQ3_K(const BlockQ3_K* x, const BlockQ8_K* y, int64_t nb) {
  Lanes acc;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * H(x[i].d);
    int8_t scales[16];
    UnpackQ3KScales(x[i].scales, scales);
    int32_t sumi[8] = {};
    int q[32];
    for (int j = 0; j < 2; ++j) {
      for (int k = 0; k < 4; ++k) {
        const int bit = 4 * j + k;
        for (int l = 0; l < 32; ++l) {
          q[l] = ((x[i].qs[32 * j + l] >> (2 * k)) & 3) - (((x[i].hmask[l] >> bit) & 1) ? 0 : 4);
        }
        const int g = 8 * j + 2 * k;
        AddChunk(q, y[i].qs + 128 * j + 32 * k, scales[g], scales[g + 1], sumi);
      }
    }
    FmaLanes(d, sumi, &acc);
  }
  return acc.Sum();
}

// The min term of Q4_K/Q5_K: sum over the 8 groups of 32 of min * (sum of their quants).
PAGODA_HOT void MinProducts(const BlockQ8_K& y, const uint8_t* mins, int32_t* prod4) {
  int32_t g[8];
  for (int t = 0; t < 8; ++t) g[t] = y.bsums[2 * t] + y.bsums[2 * t + 1];
  for (int k = 0; k < 4; ++k) prod4[k] = mins[2 * k] * g[2 * k] + mins[2 * k + 1] * g[2 * k + 1];
}

// Q4_K (bits = 0) and Q5_K (bits = 1): quants of chunk c are nibble c % 2 of qs[32 * (c / 2)
// + l], plus 16 times bit c of qh[l] for Q5_K.
template <typename Block>
PAGODA_HOT void KQuantSums(const Block& x, const BlockQ8_K& y, const uint8_t* qh, const uint8_t* sc,
                           int32_t* sumi) {
  int q[32];
  for (int c = 0; c < 8; ++c) {
    const uint8_t* qs = x.qs + 32 * (c / 2);
    for (int l = 0; l < 32; ++l) {
      q[l] =
          (c % 2 == 0 ? qs[l] & 0xF : qs[l] >> 4) + (qh != nullptr ? ((qh[l] >> c) & 1) << 4 : 0);
    }
    AddChunk(q, y.qs + 32 * c, sc[c], sc[c], sumi);
  }
}

PAGODA_HOT void UnpackScalesMins(const uint8_t* packed, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 8; ++j) ScaleMinK4(j, packed, &sc[j], &m[j]);
}

PAGODA_HOT float DotQ4_K(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb) {
  Lanes acc;
  float acc_m[4] = {};
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * H(x[i].d);
    const float dmin = -y[i].d * H(x[i].dmin);
    uint8_t sc[8], m[8];
    UnpackScalesMins(x[i].scales, sc, m);
    int32_t prod[4];
    MinProducts(y[i], m, prod);
    for (int k = 0; k < 4; ++k) acc_m[k] = std::fma(dmin, static_cast<float>(prod[k]), acc_m[k]);
    int32_t sumi[8] = {};
    KQuantSums(x[i], y[i], nullptr, sc, sumi);
    FmaLanes(d, sumi, &acc);
  }
  return acc.Sum() + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

PAGODA_HOT float DotQ5_K(const BlockQ5_K* x, const BlockQ8_K* y, int64_t nb) {
  Lanes acc;
  float summs = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * H(x[i].d);
    const float dmin = -y[i].d * H(x[i].dmin);
    uint8_t sc[8], m[8];
    UnpackScalesMins(x[i].scales, sc, m);
    int32_t prod[4];
    MinProducts(y[i], m, prod);
    const int32_t total = (prod[0] + prod[1]) + (prod[2] + prod[3]);
    summs = std::fma(dmin, static_cast<float>(total), summs);  // ggml's build contracts this
    int32_t sumi[8] = {};
    KQuantSums(x[i], y[i], x[i].qh, sc, sumi);
    FmaLanes(d, sumi, &acc);
  }
  return acc.Sum() + summs;
}

// Q6_K: unsigned 6-bit quants, then 32 * (scale-weighted block sums) subtracted per lane
// (lane u: the 16-element groups 2u and 2u + 1).
PAGODA_HOT float DotQ6_K(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb) {
  Lanes acc;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * H(x[i].d);
    const int8_t* sc = x[i].scales;
    int32_t sumi[8] = {};
    int q[32];
    for (int j = 0; j < 2; ++j) {
      const uint8_t* ql = x[i].ql + 64 * j;
      const uint8_t* qh = x[i].qh + 32 * j;
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) {
          const int low = k < 2 ? ql[l + 32 * k] & 0xF : ql[l + 32 * (k - 2)] >> 4;
          q[l] = low | (((qh[l] >> (2 * k)) & 3) << 4);
        }
        const int g = 8 * j + 2 * k;
        AddChunk(q, y[i].qs + 128 * j + 32 * k, sc[g], sc[g + 1], sumi);
      }
    }
    for (int u = 0; u < 8; ++u) {
      sumi[u] -= 32 * (y[i].bsums[2 * u] * sc[2 * u] + y[i].bsums[2 * u + 1] * sc[2 * u + 1]);
    }
    FmaLanes(d, sumi, &acc);
  }
  return acc.Sum();
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

float VecDot(DType weight_type, int64_t n, const void* w, const void* act) {
  float result;
  if (CpuIsaActive(CpuIsa::kAvx2) && VecDotAvx2(weight_type, n, w, act, &result)) return result;
  return VecDotPortable(weight_type, n, w, act);
}

void VecDotRows(DType weight_type, int64_t n, const WeightRows& w, const ActRows& act, float* out,
                int64_t out_stride) {
  const CpuIsa isa = ActiveCpuIsa();
  if (isa == CpuIsa::kAvx512Vnni && VecDotRowsAvx512Vnni(weight_type, n, w, act, out, out_stride)) {
    return;
  }
  if (isa == CpuIsa::kAvx512 && VecDotRowsAvx512(weight_type, n, w, act, out, out_stride)) return;
  if (isa >= CpuIsa::kAvx2 && VecDotRowsAvx2(weight_type, n, w, act, out, out_stride)) return;
  const auto* a = static_cast<const uint8_t*>(act.data);
  const auto* wr = static_cast<const uint8_t*>(w.data);
  for (int64_t c = 0; c < w.rows; ++c) {
    for (int r = 0; r < act.rows; ++r) {
      out[r * out_stride + c] = VecDot(weight_type, n, wr + c * w.stride, a + r * act.stride);
    }
  }
}

void WidenScales(const void* q8_0_row, int64_t n, float* scales) {
  const auto* blocks = static_cast<const BlockQ8_0*>(q8_0_row);
  for (int64_t i = 0; i < n / 32; ++i) scales[i] = H(blocks[i].d);
}

void TransposeBlockScales(DType type, const void* rows_data, size_t stride, int rows, int64_t n,
                          float* block_d) {
  const auto* base = static_cast<const uint8_t*>(rows_data);
  const bool k_quant = type == DType::kQ8_K;
  for (int64_t i = 0; i < n / (k_quant ? kQkK : 32); ++i) {
    for (int r = 0; r < kVecDotRows; ++r) {
      float d = 0.f;
      if (r < rows) {
        d = k_quant ? As<BlockQ8_K>(base + r * stride)[i].d
                    : H(As<BlockQ8_0>(base + r * stride)[i].d);
      }
      block_d[kVecDotRows * i + r] = d;
    }
  }
}

void PackQuants(DType type, const void* rows_data, size_t stride, int rows, int64_t n, int8_t* qs) {
  const auto* base = static_cast<const uint8_t*>(rows_data);
  if (type == DType::kQ8_K) {
    const int64_t nb = n / kQkK;
    auto* sums = reinterpret_cast<int16_t*>(qs + kVecDotRows * n);
    std::memset(sums, 0, sizeof(int16_t) * 32 * nb * (kVecDotRows / 4));
    for (int r = 0; r < rows; ++r) {
      const auto* blocks = As<BlockQ8_K>(base + r * stride);
      for (int64_t i = 0; i < nb; ++i) {
        std::memcpy(qs + r * n + kQkK * i, blocks[i].qs, kQkK);
        int16_t* row_sums = sums + 32 * ((r / 4) * nb + i) + 8 * (r % 4);
        for (int k = 0; k < 8; ++k) {
          row_sums[k] = static_cast<int16_t>(blocks[i].bsums[2 * k] + blocks[i].bsums[2 * k + 1]);
        }
      }
    }
    return;
  }
  for (int r = 0; r + 1 < rows; r += 2) {
    const auto* a = As<BlockQ8_0>(base + r * stride);
    const auto* b = As<BlockQ8_0>(base + (r + 1) * stride);
    int8_t* pair = qs + r * n;
    for (int64_t i = 0; i < n / kQk; ++i) {
      for (int j = 0; j < kQk; ++j) {
        pair[2 * kQk * i + j] = static_cast<int8_t>(a[i].qs[j] ^ 0x80);
        pair[2 * kQk * i + kQk + j] = static_cast<int8_t>(b[i].qs[j] ^ 0x80);
      }
    }
  }
}

size_t PackedQuantsBytes(DType type, int64_t n) {
  const auto quants = static_cast<size_t>(n) * kVecDotRows;
  if (type != DType::kQ8_K) return quants;
  return quants + sizeof(int16_t) * 32 * static_cast<size_t>(n / kQkK) * (kVecDotRows / 4);
}

float VecDotPortable(DType weight_type, int64_t n, const void* w, const void* act) {
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
      return DotQ4_K(As<BlockQ4_K>(w), As<BlockQ8_K>(act), nb);
    case DType::kQ5_K:
      return DotQ5_K(As<BlockQ5_K>(w), As<BlockQ8_K>(act), nb);
    case DType::kQ6_K:
      return DotQ6_K(As<BlockQ6_K>(w), As<BlockQ8_K>(act), nb);
    case DType::kQ8_1:
    case DType::kQ8_K:
      break;  // activation-only formats are never weights
  }
  return 0.f;
}

}  // namespace pagoda::kernels::quant
