// The int8 KV cache's stores and loads (layout in kernels/kv_cache.h): K and V alike, a step
// per token and head (symmetric). Attention reads the codes directly (cpu_attention.cc); these
// are the writers.
#pragma once

#include <cstdint>

#include "kernels/kv_cache.h"

namespace pagoda::kernels::cpu {

// Stores one token's K (kind 0) or V (kind 1), all heads, f32, at `slot` of `layer`: codes
// round(x / s), s = max|x| / 127 per head. Precondition: cache.shape.dtype == kI8.
void StoreInt8(const float* x, const PagedKvCache& cache, int32_t layer, int32_t kind,
               int64_t slot);

// The value attention sees for element e of head h at `slot` (kind 0: K, 1: V) of `layer`.
// Precondition: cache.shape.dtype == kI8 and the slot was stored.
float LoadInt8(const PagedKvCache& cache, int32_t layer, int32_t kind, int64_t slot, int32_t h,
               int32_t e);

}  // namespace pagoda::kernels::cpu
