#include "kernels/quant/activation_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu_isa.h"
#include "kernels/quant/half.h"
#include "kernels/quant/quant_types.h"
#include "kernels/quant/quantize.h"
#include "kernels/quant/vec_dot_avx2.h"

namespace pagoda::kernels::quant {
namespace {

// x86's VCVTPS2DQ, which ggml's x86 quantizer uses: nearest integer, ties to even; NaN and
// values out of int range (an amax so small that 127 / amax overflows) give INT_MIN.
int RoundLikeCvtps(float v) {
  const float r = std::nearbyint(v);
  return r >= -2147483648.f && r < 2147483648.f ? static_cast<int>(r)
                                                : std::numeric_limits<int>::min();
}

// One 32-element block as ggml's x86 quantize_row_q8_0/q8_1 computes it; returns d and
// the sum of the quants.
float Q8Block(const float* x, int8_t* qs, int* sum) {
  float amax = 0.f;
  for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  const float id = amax != 0.f ? 127.f / amax : 0.f;
  uint32_t s = 0;  // wraps, as ggml's int32 vector lanes do
  for (int j = 0; j < kQk; ++j) {
    const int q = RoundLikeCvtps(x[j] * id);
    qs[j] = static_cast<int8_t>(std::clamp(q, -128, 127));
    s += static_cast<uint32_t>(q);
  }
  *sum = static_cast<int>(s);
  return d;
}

void Q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk) {
    int sum;
    y[i].d = FloatToHalf(Q8Block(x, y[i].qs, &sum));
  }
}

void Q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk) {
    int sum;
    const float d = Q8Block(x, y[i].qs, &sum);
    y[i].d = FloatToHalf(d);
    y[i].s = FloatToHalf(d * static_cast<float>(sum));
  }
}

void Q8_K(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    float max = 0, amax = 0;
    for (int j = 0; j < kQkK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.f) {
      y[i].d = 0;
      std::memset(y[i].qs, 0, kQkK);
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));  // ggml leaves them stale; they're 0
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQkK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * x[j])));
    }
    for (int j = 0; j < kQkK / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace

DType VecDotType(DType weight_type) {
  switch (weight_type) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0:
    case DType::kQ8_0x16:
      return DType::kQ8_0;
    case DType::kQ4_1:
    case DType::kQ5_1:
      return DType::kQ8_1;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ4_Kx16:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ6_Kx16:
      return DType::kQ8_K;
    default:
      return weight_type;
  }
}

void QuantizeActivations(DType type, const float* x, void* dst, int64_t n) {
  if (CpuIsaActive(CpuIsa::kAvx2) && QuantizeActivationsAvx2(type, x, dst, n)) return;
  QuantizeActivationsPortable(type, x, dst, n);
}

void QuantizeActivationsPortable(DType type, const float* x, void* dst, int64_t n) {
  const int64_t nb = n / DTypeBlockElems(type);
  switch (type) {
    case DType::kQ8_0:
      return Q8_0(x, static_cast<BlockQ8_0*>(dst), nb);
    case DType::kQ8_1:
      return Q8_1(x, static_cast<BlockQ8_1*>(dst), nb);
    case DType::kQ8_K:
      return Q8_K(x, static_cast<BlockQ8_K*>(dst), nb);
    default:
      return QuantizeRow(type, x, dst, n);  // F32 copy, F16/BF16 rounding
  }
}

}  // namespace pagoda::kernels::quant
