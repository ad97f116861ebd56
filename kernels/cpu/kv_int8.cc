#include "kernels/cpu/kv_int8.h"

#include <algorithm>
#include <cmath>

namespace pagoda::kernels::cpu {
namespace {

constexpr float kLevels = 255.f;  // codes -128..127

// Code of x with step s and offset z (x ~= code * s + z); 0 when the range is one point.
int8_t KeyCode(float x, float s, float z) {
  if (s <= 0.f) return 0;
  return static_cast<int8_t>(std::clamp(std::nearbyint((x - z) / s), -128.f, 127.f));
}

// K codes of `layer` at `slot`, head h.
int8_t* KeyCodes(const PagedKvCache& cache, int32_t layer, int64_t slot, int32_t h) {
  const KvCacheShape& shape = cache.shape;
  return static_cast<int8_t*>(cache.Plane(layer, 0)) + slot * shape.token_elems() +
         int64_t{h} * shape.head_dim;
}

// Step (then, head_dim floats on, offset) of channel 0 of head h in `block` of `layer`.
float* KeyParams(const PagedKvCache& cache, int32_t layer, int64_t block, int32_t h) {
  const KvCacheShape& shape = cache.shape;
  return cache.KParams(layer) + (block * shape.num_kv_heads + h) * 2 * shape.head_dim;
}

}  // namespace

void StoreKeysInt8(const float* k, int64_t stride, int32_t n, const PagedKvCache& cache,
                   int32_t layer, int64_t first) {
  const KvCacheShape& shape = cache.shape;
  const int32_t dim = shape.head_dim;
  const int64_t block = first / shape.block_size;
  const int64_t block_start = block * shape.block_size;
  const int32_t old = static_cast<int32_t>(first - block_start);  // tokens already stored
  for (int32_t h = 0; h < shape.num_kv_heads; ++h) {
    float* steps = KeyParams(cache, layer, block, h);
    float* offsets = steps + dim;
    for (int32_t c = 0; c < dim; ++c) {
      const float* x = k + int64_t{h} * dim + c;
      float lo = x[0], hi = x[0];
      for (int32_t t = 1; t < n; ++t)
        lo = std::min(lo, x[t * stride]), hi = std::max(hi, x[t * stride]);
      const float s = steps[c], z = offsets[c];
      const float old_lo = z - 128.f * s, old_hi = z + 127.f * s;
      if (old > 0 && lo >= old_lo && hi <= old_hi) {
        for (int32_t t = 0; t < n; ++t)
          KeyCodes(cache, layer, first + t, h)[c] = KeyCode(x[t * stride], s, z);
        continue;
      }
      if (old > 0) lo = std::min(lo, old_lo), hi = std::max(hi, old_hi);
      const float s_new = (hi - lo) / kLevels;
      const float z_new = lo + 128.f * s_new;
      for (int32_t t = 0; t < old; ++t) {  // re-round the block's earlier codes
        int8_t& code = KeyCodes(cache, layer, block_start + t, h)[c];
        code = KeyCode(code * s + z, s_new, z_new);
      }
      for (int32_t t = 0; t < n; ++t) {
        KeyCodes(cache, layer, first + t, h)[c] = KeyCode(x[t * stride], s_new, z_new);
      }
      steps[c] = s_new;
      offsets[c] = z_new;
    }
  }
}

void StoreValueInt8(const float* v, const PagedKvCache& cache, int32_t layer, int64_t slot) {
  const KvCacheShape& shape = cache.shape;
  auto* codes = static_cast<int8_t*>(cache.Plane(layer, 1)) + slot * shape.token_elems();
  float* scales = cache.VScales(layer) + slot * shape.num_kv_heads;
  for (int32_t h = 0; h < shape.num_kv_heads; ++h) {
    const float* x = v + int64_t{h} * shape.head_dim;
    float amax = 0.f;
    for (int32_t e = 0; e < shape.head_dim; ++e) amax = std::max(amax, std::fabs(x[e]));
    const float scale = amax / 127.f;
    const float inv = scale > 0.f ? 1.f / scale : 0.f;
    for (int32_t e = 0; e < shape.head_dim; ++e) {
      codes[int64_t{h} * shape.head_dim + e] =
          static_cast<int8_t>(std::clamp(std::nearbyint(x[e] * inv), -127.f, 127.f));
    }
    scales[h] = scale;
  }
}

float LoadInt8(const PagedKvCache& cache, int32_t layer, int32_t kind, int64_t slot, int32_t h,
               int32_t e) {
  const KvCacheShape& shape = cache.shape;
  if (kind == 0) {
    const float* steps = KeyParams(cache, layer, slot / shape.block_size, h);
    return KeyCodes(cache, layer, slot, h)[e] * steps[e] + steps[shape.head_dim + e];
  }
  const auto* codes = static_cast<const int8_t*>(cache.Plane(layer, 1)) +
                      slot * shape.token_elems() + int64_t{h} * shape.head_dim;
  return codes[e] * cache.VScales(layer)[slot * shape.num_kv_heads + h];
}

}  // namespace pagoda::kernels::cpu
