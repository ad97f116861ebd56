#include "kernels/cpu/kv_int8.h"

#include <algorithm>
#include <cmath>

namespace pagoda::kernels::cpu {
namespace {

// Codes of `layer`, kind `kind`, at `slot`: all heads.
int8_t* Codes(const PagedKvCache& cache, int32_t layer, int32_t kind, int64_t slot) {
  return static_cast<int8_t*>(cache.Plane(layer, kind)) + slot * cache.shape.token_elems();
}

}  // namespace

void StoreInt8(const float* x, const PagedKvCache& cache, int32_t layer, int32_t kind,
               int64_t slot) {
  const KvCacheShape& shape = cache.shape;
  int8_t* codes = Codes(cache, layer, kind, slot);
  float* scales = cache.Scales(layer, kind) + slot * shape.num_kv_heads;
  for (int32_t h = 0; h < shape.num_kv_heads; ++h) {
    const float* head = x + int64_t{h} * shape.head_dim;
    float amax = 0.f;
    for (int32_t e = 0; e < shape.head_dim; ++e) amax = std::max(amax, std::fabs(head[e]));
    const float scale = amax / 127.f;
    const float inv = scale > 0.f ? 1.f / scale : 0.f;
    for (int32_t e = 0; e < shape.head_dim; ++e) {
      codes[int64_t{h} * shape.head_dim + e] =
          static_cast<int8_t>(std::clamp(std::nearbyint(head[e] * inv), -127.f, 127.f));
    }
    scales[h] = scale;
  }
}

float LoadInt8(const PagedKvCache& cache, int32_t layer, int32_t kind, int64_t slot, int32_t h,
               int32_t e) {
  const KvCacheShape& shape = cache.shape;
  return Codes(cache, layer, kind, slot)[int64_t{h} * shape.head_dim + e] *
         cache.Scales(layer, kind)[slot * shape.num_kv_heads + h];
}

}  // namespace pagoda::kernels::cpu
