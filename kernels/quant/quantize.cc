// The 32-element formats' reference quantizers and the dispatch; the K formats are in
// quantize_k.cc, the activation quantizers of the CPU dot products in activation_quant.cc.
#include "kernels/quant/quantize.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/quant/activation_quant.h"
#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"

namespace pagoda::kernels::quant {
namespace {

// The element of largest magnitude in x[0, n) (the first one on ties), or 0.
float SignedAbsMax(const float* x, int n) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void MinMax(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

void Q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk) {
    const float d = SignedAbsMax(x, kQk) / -8;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    for (int j = 0; j < kQk / 2; ++j) {
      const int x0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int x1 =
          std::min(15, static_cast<int>(static_cast<int8_t>(x[j + kQk / 2] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(x0 | (x1 << 4));
    }
  }
}

void Q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk) {
    float min, max;
    MinMax(x, kQk, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    y[i].m = FloatToHalf(min);
    for (int j = 0; j < kQk / 2; ++j) {
      const float v0 = (x[j] - min) * id;
      const float v1 = (x[j + kQk / 2] - min) * id;
      const int x0 = std::min(15, static_cast<int>(static_cast<int8_t>(v0 + 0.5f)));
      const int x1 = std::min(15, static_cast<int>(static_cast<int8_t>(v1 + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>(x0 | (x1 << 4));
    }
  }
}

void Q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk) {
    const float d = SignedAbsMax(x, kQk) / -16;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQk / 2; ++j) {
      const int x0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const int x1 =
          std::min(31, static_cast<int>(static_cast<int8_t>(x[j + kQk / 2] * id + 16.5f)));
      y[i].qs[j] = static_cast<uint8_t>((x0 & 0x0F) | ((x1 & 0x0F) << 4));
      qh |= ((static_cast<uint32_t>(x0) & 0x10u) >> 4) << j;
      qh |= ((static_cast<uint32_t>(x1) & 0x10u) >> 4) << (j + kQk / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void Q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk) {
    float min, max;
    MinMax(x, kQk, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    y[i].m = FloatToHalf(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQk / 2; ++j) {
      const float v0 = (x[j] - min) * id;
      const float v1 = (x[j + kQk / 2] - min) * id;
      const auto x0 = static_cast<uint8_t>(static_cast<int>(v0 + 0.5f));
      const auto x1 = static_cast<uint8_t>(static_cast<int>(v1 + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>((x0 & 0x0F) | ((x1 & 0x0F) << 4));
      qh |= ((x0 & 0x10u) >> 4) << j;
      qh |= ((x1 & 0x10u) >> 4) << (j + kQk / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void Q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk) {
    float amax = 0.f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    for (int j = 0; j < kQk; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void Halves(const float* x, uint16_t* y, int64_t n, bool bf16) {
  for (int64_t k = 0; k < n; ++k) y[k] = bf16 ? FloatToBf16(x[k]) : FloatToHalf(x[k]);
}

template <typename Block>
Block* As(void* p) {
  return static_cast<Block*>(p);
}

}  // namespace

int NearestInt(float x) {
  const float val = x + 12582912.f;
  return static_cast<int>(std::bit_cast<uint32_t>(val) & 0x007FFFFF) - 0x00400000;
}

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  const int64_t nb = n / DTypeBlockElems(type);
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16:
      return Halves(src, static_cast<uint16_t*>(dst), n, type == DType::kBF16);
    case DType::kQ4_0:
      return Q4_0(src, As<BlockQ4_0>(dst), nb);
    case DType::kQ4_1:
      return Q4_1(src, As<BlockQ4_1>(dst), nb);
    case DType::kQ5_0:
      return Q5_0(src, As<BlockQ5_0>(dst), nb);
    case DType::kQ5_1:
      return Q5_1(src, As<BlockQ5_1>(dst), nb);
    case DType::kQ8_0:
      return Q8_0(src, As<BlockQ8_0>(dst), nb);
    case DType::kQ2_K:
      return QuantizeRowQ2_K(src, dst, n);
    case DType::kQ3_K:
      return QuantizeRowQ3_K(src, dst, n);
    case DType::kQ4_K:
      return QuantizeRowQ4_K(src, dst, n);
    case DType::kQ5_K:
      return QuantizeRowQ5_K(src, dst, n);
    case DType::kQ6_K:
      return QuantizeRowQ6_K(src, dst, n);
    case DType::kQ8_1:
    case DType::kQ8_K:
      return QuantizeActivations(type, src, dst, n);
  }
}

}  // namespace pagoda::kernels::quant
