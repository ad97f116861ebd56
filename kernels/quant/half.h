// IEEE binary16 and bfloat16 conversions with ggml's semantics (round to nearest even, as
// F16C's _cvtss_sh and ggml's bf16 rounding do), shared by the quantizers and kernels.
#pragma once

#include <cstdint>

namespace pagoda::kernels::quant {

// binary16 -> binary32; exact for every input (subnormals, inf, NaN payloads).
float HalfToFloat(uint16_t h);
// binary32 -> binary16, rounding to nearest even; overflow gives inf, NaN stays NaN.
uint16_t FloatToHalf(float f);
// bfloat16 -> binary32 (exact).
float Bf16ToFloat(uint16_t b);
// binary32 -> bfloat16, rounding to nearest even; NaN stays a quiet NaN.
uint16_t FloatToBf16(float f);

}  // namespace pagoda::kernels::quant
