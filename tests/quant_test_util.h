// Helpers shared by the quantized-kernel tests: float bits and random weight rows.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace pagoda::testing {

inline uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Random rows with uneven magnitudes (so that block scales differ); `extreme` makes some
// blocks a single large value among zeros, which drives quants to their range's ends.
inline std::vector<float> RandomRows(int64_t rows, int64_t k, uint32_t seed, bool extreme) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> v(rows * k);
  for (int64_t i = 0; i < rows * k; ++i) {
    v[i] = normal(rng) * static_cast<float>(1 + (i % 11) * (i % 3));
  }
  if (extreme) {
    for (int64_t b = 0; b < rows * k; b += 64) {
      for (int64_t i = b; i < b + 32 && i < rows * k; ++i) v[i] = 0.f;
      v[b + (b / 64) % 32] = (b / 64) % 2 == 0 ? 1e4f : -1e4f;
    }
  }
  return v;
}

}  // namespace pagoda::testing
