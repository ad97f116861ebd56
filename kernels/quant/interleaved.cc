#include "kernels/quant/interleaved.h"

#include <cmath>
#include <cstring>

#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"

namespace pagoda::kernels::quant {
namespace {

// Calls move(out block, row, in block) for every row of every group and block: rows
// [0, rows) of `nb` blocks of In at `src`, groups of sixteen of Out at `dst`.
template <typename In, typename Out, typename Move>
void Interleave(const void* src, int64_t rows, int64_t nb, void* dst, Move&& move) {
  const auto* in = static_cast<const In*>(src);
  auto* out = static_cast<Out*>(dst);
  for (int64_t g = 0; g < rows / kInterleavedRows; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      for (int row = 0; row < kInterleavedRows; ++row) {
        move(out[g * nb + i], row, in[(g * kInterleavedRows + row) * nb + i]);
      }
    }
  }
}

// Row r's group of an interleaved matrix of `nb` blocks per row, and its row in the group.
template <typename Block>
const Block* Group(const void* data, int64_t r, int64_t nb, int* row) {
  *row = static_cast<int>(r % kInterleavedRows);
  return static_cast<const Block*>(data) + r / kInterleavedRows * nb;
}

// Sub-block s's min of row `row`.
int Min(const BlockQ4_Kx16& b, int row, int s) { return b.mins[s / 2][row][s % 2]; }

// Quant e (0..255) of row `row`.
int Quant(const BlockQ4_Kx16& b, int row, int e) {
  const int j = e / 64, s = (e % 64) / 32, l = e % 32;
  return (b.qs[j][l / 4][row][l % 4] >> (4 * s)) & 0x0F;
}

int Quant(const BlockQ8_0x16& b, int row, int e) { return b.qs[e / 4][row][e % 4]; }

int Quant(const BlockQ6_Kx16& b, int row, int e) { return b.qs[e / 4][row][e % 4]; }

// Sub-block s's (quants 16s .. 16s + 15) scale of row `row`.
int Scale(const BlockQ6_Kx16& b, int row, int s) { return b.scales[s / 2][row][s % 2]; }

// Quant e (0..255) of a Q6_K block, unsigned (0..63): ggml's layout (dequantize_row_q6_K),
// halves of 128 whose quarter k takes the low (k even) or high nibbles of ql and bits 2k,
// 2k + 1 of qh.
int UnsignedQuant(const BlockQ6_K& x, int e) {
  const int half = e / 128, k = e % 128 / 32, l = e % 32;
  const uint8_t ql = x.ql[64 * half + 32 * (k % 2) + l];
  const uint8_t qh = x.qh[32 * half + l];
  return ((k < 2 ? ql & 0x0F : ql >> 4) | (((qh >> (2 * k)) & 3) << 4));
}

}  // namespace

void InterleaveQ4_K(const void* src, int64_t rows, int64_t n, void* dst) {
  Interleave<BlockQ4_K, BlockQ4_Kx16>(
      src, rows, n / kQkK, dst, [](BlockQ4_Kx16& o, int row, const BlockQ4_K& x) {
        o.d[row] = x.d;
        o.dmin[row] = x.dmin;
        for (int s = 0; s < 8; ++s) {
          ScaleMinK4(s, x.scales, &o.scales[s][row], &o.mins[s / 2][row][s % 2]);
        }
        for (int j = 0; j < 4; ++j) {
          for (int k = 0; k < 8; ++k) std::memcpy(o.qs[j][k][row], x.qs + 32 * j + 4 * k, 4);
        }
      });
}

void InterleaveQ8_0(const void* src, int64_t rows, int64_t n, void* dst) {
  Interleave<BlockQ8_0, BlockQ8_0x16>(src, rows, n / kQk, dst,
                                      [](BlockQ8_0x16& o, int row, const BlockQ8_0& x) {
                                        o.d[row] = x.d;
                                        for (int k = 0; k < 8; ++k) {
                                          std::memcpy(o.qs[k][row], x.qs + 4 * k, 4);
                                        }
                                      });
}

void InterleaveQ6_K(const void* src, int64_t rows, int64_t n, void* dst) {
  Interleave<BlockQ6_K, BlockQ6_Kx16>(
      src, rows, n / kQkK, dst, [](BlockQ6_Kx16& o, int row, const BlockQ6_K& x) {
        o.d[row] = x.d;
        for (int s = 0; s < 16; ++s) {
          o.scales[s / 2][row][s % 2] = x.scales[s];
        }
        for (int e = 0; e < kQkK; ++e) {
          o.qs[e / 4][row][e % 4] = static_cast<uint8_t>(UnsignedQuant(x, e));
        }
      });
}

void DequantizeQ4_Kx16Row(const void* data, int64_t r, int64_t n, float* out) {
  const int64_t nb = n / kQkK;
  int row;
  const BlockQ4_Kx16* x = Group<BlockQ4_Kx16>(data, r, nb, &row);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(x[i].d[row]), dmin = HalfToFloat(x[i].dmin[row]);
    for (int s = 0; s < 8; ++s) {
      // ggml's dequantize_row_q4_K: d * sc * q - dmin * m.
      const float d1 = d * x[i].scales[s][row], m1 = dmin * Min(x[i], row, s);
      for (int l = 0; l < 32; ++l) {
        out[kQkK * i + 32 * s + l] = d1 * static_cast<float>(Quant(x[i], row, 32 * s + l)) - m1;
      }
    }
  }
}

void DequantizeQ8_0x16Row(const void* data, int64_t r, int64_t n, float* out) {
  const int64_t nb = n / kQk;
  int row;
  const BlockQ8_0x16* x = Group<BlockQ8_0x16>(data, r, nb, &row);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(x[i].d[row]);
    for (int l = 0; l < kQk; ++l) out[kQk * i + l] = static_cast<float>(Quant(x[i], row, l)) * d;
  }
}

void DequantizeQ6_Kx16Row(const void* data, int64_t r, int64_t n, float* out) {
  const int64_t nb = n / kQkK;
  int row;
  const BlockQ6_Kx16* x = Group<BlockQ6_Kx16>(data, r, nb, &row);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(x[i].d[row]);
    for (int e = 0; e < kQkK; ++e) {
      // ggml's dequantize_row_q6_K: d * scale * q.
      out[kQkK * i + e] = d * static_cast<float>(Scale(x[i], row, e / 16)) *
                          static_cast<float>(Quant(x[i], row, e) - 32);
    }
  }
}

float VecDotQ4_Kx16(const void* group, int row, int64_t n, const void* act) {
  const int64_t nb = n / kQkK;
  const auto* x = static_cast<const BlockQ4_Kx16*>(group);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t dot = 0, mins = 0;
    for (int s = 0; s < 8; ++s) {
      int32_t sum = 0;
      for (int l = 0; l < 32; ++l) sum += Quant(x[i], row, 32 * s + l) * y[i].qs[32 * s + l];
      dot += x[i].scales[s][row] * sum;
      mins += Min(x[i], row, s) * (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
    }
    const float d = HalfToFloat(x[i].d[row]) * y[i].d;
    const float dmin = HalfToFloat(x[i].dmin[row]) * y[i].d;
    acc = std::fma(-dmin, static_cast<float>(mins), acc);
    acc = std::fma(d, static_cast<float>(dot), acc);
  }
  return acc;
}

float VecDotQ8_0x16(const void* group, int row, int64_t n, const void* act) {
  const int64_t nb = n / kQk;
  const auto* x = static_cast<const BlockQ8_0x16*>(group);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sum = 0;
    for (int l = 0; l < kQk; ++l) sum += Quant(x[i], row, l) * y[i].qs[l];
    acc = std::fma(HalfToFloat(x[i].d[row]) * HalfToFloat(y[i].d), static_cast<float>(sum), acc);
  }
  return acc;
}

float VecDotQ6_Kx16(const void* group, int row, int64_t n, const void* act) {
  const int64_t nb = n / kQkK;
  const auto* x = static_cast<const BlockQ6_Kx16*>(group);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t dot = 0;
    for (int s = 0; s < 16; ++s) {
      int32_t sum = 0;
      for (int l = 0; l < 16; ++l) sum += Quant(x[i], row, 16 * s + l) * y[i].qs[16 * s + l];
      dot += Scale(x[i], row, s) * (sum - 32 * y[i].bsums[s]);
    }
    acc = std::fma(HalfToFloat(x[i].d[row]) * y[i].d, static_cast<float>(dot), acc);
  }
  return acc;
}

void SumPairsQ8_K(const void* act, int64_t n, int16_t* sums) {
  const auto* y = static_cast<const BlockQ8_K*>(act);
  for (int64_t i = 0; i < n / kQkK; ++i) {
    for (int s = 0; s < 8; ++s) {
      sums[8 * i + s] = static_cast<int16_t>(y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
    }
  }
}

void BiasQuantsQ8_0(const void* act, int64_t n, uint8_t* biased) {
  const auto* y = static_cast<const BlockQ8_0*>(act);
  for (int64_t i = 0; i < n / kQk; ++i) {
    for (int l = 0; l < kQk; ++l) biased[kQk * i + l] = static_cast<uint8_t>(y[i].qs[l]) ^ 0x80;
  }
}

}  // namespace pagoda::kernels::quant
