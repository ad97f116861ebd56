// Byte layouts of ggml's block formats (ggml-common.h): what a GGUF file stores for each
// quantized type, and the activation formats Q8_0/Q8_1/Q8_K that ggml's CPU dot products
// quantize activations into. Halves are raw binary16 bits (see half.h).
#pragma once

#include <cstdint>

namespace pagoda::kernels::quant {

inline constexpr int kQk = 32;    // elements per block of the 32-element formats
inline constexpr int kQkK = 256;  // elements per super-block of the K formats
inline constexpr int kKScaleSize = 12;

// x = d * (q - 8), q in [0, 16).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQk / 2];  // element j in the low nibble of qs[j], element j + 16 in the high
};
// x = d * q + m, q in [0, 16).
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQk / 2];
};
// x = d * (q - 16), q in [0, 32); bit 4 of element j is bit j of qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};
// x = d * q + m, q in [0, 32).
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};
// x = d * q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQk];
};
// x = d * q; s = d * sum(q) (activations only).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQk];
};
// 16 groups of 16: x = d * (scales & 15) * q - dmin * (scales >> 4), q in [0, 4).
struct BlockQ2_K {
  uint8_t scales[kQkK / 16];
  uint8_t qs[kQkK / 4];
  uint16_t d;
  uint16_t dmin;
};
// 16 groups of 16 with 6-bit signed scales: x = d * (scale - 32) * (q - 4), q in [0, 8).
struct BlockQ3_K {
  uint8_t hmask[kQkK / 8];
  uint8_t qs[kQkK / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 groups of 32 with 6-bit scales and mins: x = d * sc * q - dmin * m, q in [0, 16).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQkK / 2];
};
// As Q4_K with a fifth bit per quant in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQkK / 8];
  uint8_t qs[kQkK / 2];
};
// 16 groups of 16 with int8 scales: x = d * scale * (q - 32), q in [0, 64).
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];
  uint8_t qh[kQkK / 4];
  int8_t scales[kQkK / 16];
  uint16_t d;
};
// Activations for the K dot products: x = d * q; bsums are sums of 16 consecutive q.
struct BlockQ8_K {
  float d;
  int8_t qs[kQkK];
  int16_t bsums[kQkK / 16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// Scale and min j (0..7) of a Q4_K/Q5_K block's 12 packed 6-bit scale bytes.
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The 16 signed 6-bit scales (already minus 32) of a Q3_K block.
inline void UnpackQ3KScales(const uint8_t* packed, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

}  // namespace pagoda::kernels::quant
