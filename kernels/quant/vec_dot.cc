#include "kernels/quant/vec_dot.h"

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

float DotQ4_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t ib = 0; ib < nb; ++ib) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQk / 2; ++j) {
      sumi0 += ((x[ib].qs[j] & 0x0F) - 8) * y[ib].qs[j];
      sumi1 += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + kQk / 2];
    }
    sumf += static_cast<float>(sumi0 + sumi1) * HalfToFloat(x[ib].d) * HalfToFloat(y[ib].d);
  }
  return sumf;
}

float DotQ4_1(const BlockQ4_1* x, const BlockQ8_1* y, int64_t nb) {
  float sumf = 0;
  for (int64_t ib = 0; ib < nb; ++ib) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQk / 2; ++j) {
      sumi0 += (x[ib].qs[j] & 0x0F) * y[ib].qs[j];
      sumi1 += (x[ib].qs[j] >> 4) * y[ib].qs[j + kQk / 2];
    }
    sumf += (HalfToFloat(x[ib].d) * HalfToFloat(y[ib].d)) * static_cast<float>(sumi0 + sumi1) +
            HalfToFloat(x[ib].m) * HalfToFloat(y[ib].s);
  }
  return sumf;
}

float DotQ5_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t ib = 0; ib < nb; ++ib) {
    const uint32_t qh = LoadQh(x[ib].qh);
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQk / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      sumi0 += (((x[ib].qs[j] & 0x0F) | h0) - 16) * y[ib].qs[j];
      sumi1 += (((x[ib].qs[j] >> 4) | h1) - 16) * y[ib].qs[j + kQk / 2];
    }
    sumf += (HalfToFloat(x[ib].d) * HalfToFloat(y[ib].d)) * static_cast<float>(sumi0 + sumi1);
  }
  return sumf;
}

float DotQ5_1(const BlockQ5_1* x, const BlockQ8_1* y, int64_t nb) {
  float sumf = 0;
  for (int64_t ib = 0; ib < nb; ++ib) {
    const uint32_t qh = LoadQh(x[ib].qh);
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQk / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      sumi0 += ((x[ib].qs[j] & 0x0F) | h0) * y[ib].qs[j];
      sumi1 += ((x[ib].qs[j] >> 4) | h1) * y[ib].qs[j + kQk / 2];
    }
    sumf += (HalfToFloat(x[ib].d) * HalfToFloat(y[ib].d)) * static_cast<float>(sumi0 + sumi1) +
            HalfToFloat(x[ib].m) * HalfToFloat(y[ib].s);
  }
  return sumf;
}

float DotQ8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t ib = 0; ib < nb; ++ib) {
    int sumi = 0;
    for (int j = 0; j < kQk; ++j) sumi += x[ib].qs[j] * y[ib].qs[j];
    sumf += static_cast<float>(sumi) * (HalfToFloat(x[ib].d) * HalfToFloat(y[ib].d));
  }
  return sumf;
}

float DotQ2_K(const BlockQ2_K* x, const BlockQ8_K* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const uint8_t* sc = x[i].scales;
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
    const float dall = y[i].d * HalfToFloat(x[i].d);
    const float dmin = y[i].d * HalfToFloat(x[i].dmin);
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
void AddLanes(const int8_t* a, const int8_t* q8, const int* group_scale, int group_size,
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

float DotQ3_K(const BlockQ3_K* x, const BlockQ8_K* y, int64_t nb) {
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
    const float d = HalfToFloat(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
  }
  float sumf = 0;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// Q4_K and Q5_K: quants in aux8 (from `unpack`), 6-bit scales and mins.
template <typename Block, typename Unpack>
float DotK4(const Block* x, const BlockQ8_K* y, int64_t nb, Unpack unpack) {
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
    const float d = HalfToFloat(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
    const float dmin = HalfToFloat(x[i].dmin) * y[i].d;
    sumf -= dmin * static_cast<float>(sumi);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

void UnpackQ4_K(const BlockQ4_K& b, int8_t* a) {
  const uint8_t* q4 = b.qs;
  for (int j = 0; j < kQkK / 64; ++j, q4 += 32, a += 64) {
    for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(q4[l] & 0xF);
    for (int l = 0; l < 32; ++l) a[l + 32] = static_cast<int8_t>(q4[l] >> 4);
  }
}

void UnpackQ5_K(const BlockQ5_K& b, int8_t* a) {
  const uint8_t* q4 = b.qs;
  uint8_t m = 1;
  for (int j = 0; j < kQkK / 64; ++j, q4 += 32, a += 64) {
    for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>((q4[l] & 0xF) + (b.qh[l] & m ? 16 : 0));
    m = static_cast<uint8_t>(m << 1);
    for (int l = 0; l < 32; ++l) a[l + 32] = static_cast<int8_t>((q4[l] >> 4) + (b.qh[l] & m ? 16 : 0));
    m = static_cast<uint8_t>(m << 1);
  }
}

float DotQ6_K(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb) {
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
    const float d = HalfToFloat(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
  }
  float sumf = 0;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

float DotHalves(const void* w, const void* act, int64_t n, bool bf16) {
  const auto* a = static_cast<const uint8_t*>(w);
  const auto* b = static_cast<const uint8_t*>(act);
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) {
    uint16_t x, y;
    std::memcpy(&x, a + 2 * k, 2);
    std::memcpy(&y, b + 2 * k, 2);
    const float p = bf16 ? Bf16ToFloat(x) * Bf16ToFloat(y) : HalfToFloat(x) * HalfToFloat(y);
    sum += p;
  }
  return static_cast<float>(sum);
}

float DotF32(const float* w, const float* a, int64_t n) {
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += static_cast<double>(w[k] * a[k]);
  return static_cast<float>(sum);
}

template <typename Block>
const Block* As(const void* p) {
  return static_cast<const Block*>(p);
}

}  // namespace

float VecDot(DType weight_type, int64_t n, const void* w, const void* act) {
  const int64_t nb = n / DTypeBlockElems(weight_type);
  switch (weight_type) {
    case DType::kF32:
      return DotF32(As<float>(w), As<float>(act), n);
    case DType::kF16:
    case DType::kBF16:
      return DotHalves(w, act, n, weight_type == DType::kBF16);
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
