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

// Row `row`'s packed scale bytes of block `b`.
void RowScales(const BlockQ4_Kx16& b, int row, uint8_t packed[12]) {
  for (int k = 0; k < 12; ++k) packed[k] = b.scales[k][row];
}

// Quant e (0..255) of row `row`.
int Quant(const BlockQ4_Kx16& b, int row, int e) {
  const int j = e / 64, s = (e % 64) / 32, l = e % 32;
  return (b.qs[j][l / 4][row][l % 4] >> (4 * s)) & 0x0F;
}

int Quant(const BlockQ8_0x16& b, int row, int e) { return b.qs[e / 4][row][e % 4]; }

}  // namespace

void InterleaveQ4_K(const void* src, int64_t rows, int64_t n, void* dst) {
  Interleave<BlockQ4_K, BlockQ4_Kx16>(src, rows, n / kQkK, dst,
                                      [](BlockQ4_Kx16& o, int row, const BlockQ4_K& x) {
                                        o.d[row] = x.d;
                                        o.dmin[row] = x.dmin;
                                        for (int k = 0; k < 12; ++k) o.scales[k][row] = x.scales[k];
                                        for (int j = 0; j < 4; ++j) {
                                          for (int k = 0; k < 8; ++k)
                                            std::memcpy(o.qs[j][k][row], x.qs + 32 * j + 4 * k, 4);
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

void DequantizeQ4_Kx16Row(const void* data, int64_t r, int64_t n, float* out) {
  const int64_t nb = n / kQkK;
  int row;
  const BlockQ4_Kx16* x = Group<BlockQ4_Kx16>(data, r, nb, &row);
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t packed[12];
    RowScales(x[i], row, packed);
    const float d = HalfToFloat(x[i].d[row]), dmin = HalfToFloat(x[i].dmin[row]);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      ScaleMinK4(s, packed, &sc, &m);
      // ggml's dequantize_row_q4_K: d * sc * q - dmin * m.
      const float d1 = d * sc, m1 = dmin * m;
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

float VecDotQ4_Kx16(const void* group, int row, int64_t n, const void* act) {
  const int64_t nb = n / kQkK;
  const auto* x = static_cast<const BlockQ4_Kx16*>(group);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t packed[12];
    RowScales(x[i], row, packed);
    int32_t dot = 0, mins = 0;
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      ScaleMinK4(s, packed, &sc, &m);
      int32_t sum = 0;
      for (int l = 0; l < 32; ++l) sum += Quant(x[i], row, 32 * s + l) * y[i].qs[32 * s + l];
      dot += sc * sum;
      mins += m * (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
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

void BiasQuantsQ8_0(const void* act, int64_t n, uint8_t* biased) {
  const auto* y = static_cast<const BlockQ8_0*>(act);
  for (int64_t i = 0; i < n / kQk; ++i) {
    for (int l = 0; l < kQk; ++l) biased[kQk * i + l] = static_cast<uint8_t>(y[i].qs[l]) ^ 0x80;
  }
}

}  // namespace pagoda::kernels::quant
