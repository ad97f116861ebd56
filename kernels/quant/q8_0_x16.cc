#include "kernels/quant/q8_0_x16.h"

#include <cmath>
#include <cstring>

#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"

namespace pagoda::kernels::quant {

void InterleaveQ8_0(const void* src, int64_t rows, int64_t n, void* dst) {
  const int64_t nb = n / kQk;
  const auto* in = static_cast<const BlockQ8_0*>(src);
  auto* out = static_cast<BlockQ8_0x16*>(dst);
  for (int64_t g = 0; g < rows / kQ8_0xRows; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      BlockQ8_0x16& o = out[g * nb + i];
      for (int row = 0; row < kQ8_0xRows; ++row) {
        const BlockQ8_0& x = in[(g * kQ8_0xRows + row) * nb + i];
        o.d[row] = x.d;
        for (int k = 0; k < 8; ++k) std::memcpy(o.qs[k][row], x.qs + 4 * k, 4);
      }
    }
  }
}

void DequantizeQ8_0x16Row(const void* data, int64_t r, int64_t n, float* out) {
  const int64_t nb = n / kQk;
  const BlockQ8_0x16* x = static_cast<const BlockQ8_0x16*>(data) + r / kQ8_0xRows * nb;
  const int row = static_cast<int>(r % kQ8_0xRows);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(x[i].d[row]);
    for (int l = 0; l < kQk; ++l)
      out[kQk * i + l] = static_cast<float>(x[i].qs[l / 4][row][l % 4]) * d;
  }
}

float VecDotQ8_0x16(const void* group, int row, int64_t n, const void* act) {
  const int64_t nb = n / kQk;
  const auto* x = static_cast<const BlockQ8_0x16*>(group);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sum = 0;
    for (int l = 0; l < kQk; ++l) sum += x[i].qs[l / 4][row][l % 4] * y[i].qs[l];
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
