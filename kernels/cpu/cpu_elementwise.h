// Elementwise CPU kernels with SIMD chosen at run time (Google Highway).
#pragma once

#include <cstdint>

namespace pagoda::kernels::cpu {

// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i] for i < n; out may
// alias gate or up. exp is Highway's (within a few ulp of std::exp).
void SiluMulRow(const float* gate, const float* up, float* out, int64_t n);

}  // namespace pagoda::kernels::cpu
