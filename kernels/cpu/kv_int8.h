// The int8 KV cache's stores and loads (layout in kernels/kv_cache.h): K with a step and an
// offset per block, head and channel (asymmetric), V with a step per token and head
// (symmetric). Attention reads the codes directly (cpu_attention.cc); these are the writers.
#pragma once

#include <cstdint>

#include "kernels/kv_cache.h"

namespace pagoda::kernels::cpu {

// Stores n tokens' K (rows of all heads, f32, `stride` floats apart) at slots first..first+n-1
// of `layer`, all in one block. Offset 0 of a block starts its channel ranges afresh; otherwise
// each channel's range widens to hold the new values and, when it grows, the block's earlier
// codes are re-rounded to the new step. Precondition: cache.shape.dtype == kI8, the slots stay
// in one block, and the block's offsets before `first` were stored since its offset 0.
void StoreKeysInt8(const float* k, int64_t stride, int32_t n, const PagedKvCache& cache,
                   int32_t layer, int64_t first);

// Stores one token's V (all heads, f32) at `slot` of `layer`: codes round(x / s), s = max|x| /
// 127 per head. Precondition: cache.shape.dtype == kI8.
void StoreValueInt8(const float* v, const PagedKvCache& cache, int32_t layer, int64_t slot);

// The value attention sees for element e of head h at `slot` (kind 0: K, 1: V) of `layer`.
// Precondition: cache.shape.dtype == kI8 and the slot was stored.
float LoadInt8(const PagedKvCache& cache, int32_t layer, int32_t kind, int64_t slot, int32_t h,
               int32_t e);

}  // namespace pagoda::kernels::cpu
