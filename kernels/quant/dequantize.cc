#include "kernels/quant/dequantize.h"

#include <cstring>

#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"

namespace pagoda::kernels::quant {
namespace {

uint32_t LoadQh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

void Q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = HalfToFloat(x[i].d);
    for (int j = 0; j < kQk / 2; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + kQk / 2] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void Q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = HalfToFloat(x[i].d);
    const float m = HalfToFloat(x[i].m);
    for (int j = 0; j < kQk / 2; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
      y[j + kQk / 2] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

void Q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = HalfToFloat(x[i].d);
    const uint32_t qh = LoadQh(x[i].qh);
    for (int j = 0; j < kQk / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      y[j] = static_cast<float>(((x[i].qs[j] & 0x0F) | h0) - 16) * d;
      y[j + kQk / 2] = static_cast<float>(((x[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void Q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = HalfToFloat(x[i].d);
    const float m = HalfToFloat(x[i].m);
    const uint32_t qh = LoadQh(x[i].qh);
    for (int j = 0; j < kQk / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) | h0) * d + m;
      y[j + kQk / 2] = static_cast<float>((x[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

void Q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = HalfToFloat(x[i].d);
    for (int j = 0; j < kQk; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void Q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = HalfToFloat(x[i].d);
    for (int j = 0; j < kQk; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void Q2_K(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(x[i].d);
    const float dmin = HalfToFloat(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n = 0; n < kQkK; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) {
            *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
          }
        }
      }
    }
  }
}

void Q3_K(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = HalfToFloat(x[i].d);
    int8_t scales[16];
    UnpackQ3KScales(x[i].scales, scales);
    const uint8_t* q = x[i].qs;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < kQkK; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * static_cast<float>(scales[is++]);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int v = ((q[l] >> shift) & 3) - ((x[i].hmask[l] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

void Q4_K(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(x[i].d);
    const float min = HalfToFloat(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      ScaleMinK4(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      ScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void Q5_K(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(x[i].d);
    const float min = HalfToFloat(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      ScaleMinK4(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      ScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) {
        *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      }
    }
  }
}

void Q6_K(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < kQkK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * static_cast<float>(q1);
        y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
        y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
        y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
      }
    }
  }
}

void Q8_K(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    for (int j = 0; j < kQkK; ++j) *y++ = x[i].d * static_cast<float>(x[i].qs[j]);
  }
}

template <typename Block>
const Block* As(const void* p) {
  return static_cast<const Block*>(p);
}

}  // namespace

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / DTypeBlockElems(type);
  const auto* u16 = static_cast<const uint8_t*>(src);
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t k = 0; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, u16 + 2 * k, 2);
        dst[k] = type == DType::kF16 ? HalfToFloat(h) : Bf16ToFloat(h);
      }
      return;
    case DType::kQ4_0:
      return Q4_0(As<BlockQ4_0>(src), dst, nb);
    case DType::kQ4_1:
      return Q4_1(As<BlockQ4_1>(src), dst, nb);
    case DType::kQ5_0:
      return Q5_0(As<BlockQ5_0>(src), dst, nb);
    case DType::kQ5_1:
      return Q5_1(As<BlockQ5_1>(src), dst, nb);
    case DType::kQ8_0:
      return Q8_0(As<BlockQ8_0>(src), dst, nb);
    case DType::kQ8_1:
      return Q8_1(As<BlockQ8_1>(src), dst, nb);
    case DType::kQ2_K:
      return Q2_K(As<BlockQ2_K>(src), dst, nb);
    case DType::kQ3_K:
      return Q3_K(As<BlockQ3_K>(src), dst, nb);
    case DType::kQ4_K:
      return Q4_K(As<BlockQ4_K>(src), dst, nb);
    case DType::kQ5_K:
      return Q5_K(As<BlockQ5_K>(src), dst, nb);
    case DType::kQ6_K:
      return Q6_K(As<BlockQ6_K>(src), dst, nb);
    case DType::kQ8_K:
      return Q8_K(As<BlockQ8_K>(src), dst, nb);
  }
}

}  // namespace pagoda::kernels::quant
