#include "kernels/quant/q4_k_x16.h"

#include <cmath>
#include <cstring>

#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"

namespace pagoda::kernels::quant {
namespace {

const BlockQ4_Kx16* Group(const void* data, int64_t g, int64_t nb) {
  return static_cast<const BlockQ4_Kx16*>(data) + g * nb;
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

}  // namespace

void InterleaveQ4_K(const void* src, int64_t rows, int64_t n, void* dst) {
  const int64_t nb = n / kQkK;
  const auto* in = static_cast<const BlockQ4_K*>(src);
  auto* out = static_cast<BlockQ4_Kx16*>(dst);
  for (int64_t g = 0; g < rows / kQ4_KxRows; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      BlockQ4_Kx16& o = out[g * nb + i];
      for (int row = 0; row < kQ4_KxRows; ++row) {
        const BlockQ4_K& x = in[(g * kQ4_KxRows + row) * nb + i];
        o.d[row] = x.d;
        o.dmin[row] = x.dmin;
        for (int k = 0; k < 12; ++k) o.scales[k][row] = x.scales[k];
        for (int j = 0; j < 4; ++j) {
          for (int k = 0; k < 8; ++k) std::memcpy(o.qs[j][k][row], x.qs + 32 * j + 4 * k, 4);
        }
      }
    }
  }
}

void DequantizeQ4_Kx16Row(const void* data, int64_t r, int64_t n, float* out) {
  const int64_t nb = n / kQkK;
  const BlockQ4_Kx16* x = Group(data, r / kQ4_KxRows, nb);
  const int row = static_cast<int>(r % kQ4_KxRows);
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

}  // namespace pagoda::kernels::quant
