// Paged attention on the CPU: every query token of the batch attends causally over its
// sequence's cached K/V, reached only through the block table.
#pragma once

#include "common/thread_pool.h"
#include "kernels/backend.h"

namespace pagoda::kernels::cpu {

// True for the KV cache types these kernels store and read: f32, f16, bf16, int8 (kI8).
bool SupportsKvDtype(DType dtype);
// Writes k, v [num_tokens, kv_heads * head_dim] (f32) into `layer` at batch.slot_mapping (a
// negative slot is skipped), converted to the cache's type (int8: a scale per token and head).
void WriteKv(const BatchInput& batch, const Tensor& k, const Tensor& v, const PagedKvCache& cache,
             int32_t layer, ThreadPool* pool);

// out [num_tokens, num_heads * head_dim] = softmax(q K^T * scale) V per head, where token j
// of sequence s (position p) sees the cached tokens 0..p of s.
void PagedAttention(const BatchInput& batch, const Tensor& q, const PagedKvCache& cache,
                    int32_t layer, const AttentionParams& params, const Tensor& out,
                    ThreadPool* pool);

}  // namespace pagoda::kernels::cpu
