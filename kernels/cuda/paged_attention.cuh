// Paged attention over the KV cache, for decode tokens and prefill chunks in one batch.
//
// Work arrives as a plan (attention_plan.h) built once per batch on the host:
//  - items: one query token over a range of its cached positions; decode tokens whose
//    context is split (split-KV) have several items, each writing a partial result that
//    the reduction kernel merges;
//  - tiles: the query tokens of a prefill chunk, a few at a time (tensor-core path only).
// Cache addressing: position t of sequence s lives at slot
//   block_tables[s][t >> log2_block_size] * block_size + (t & (block_size - 1)).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels::cuda {

// Query token `token` of sequence `seq` attends to cached positions [kv_begin, kv_end).
// partial < 0: the range is the whole context and the result goes to `out`; otherwise it is
// partial row `partial` of a split token.
struct AttentionItem {
  int32_t token;
  int32_t seq;
  int32_t kv_begin;
  int32_t kv_end;
  int32_t partial;
};

// Query tokens [token_begin, token_begin + num_tokens) of sequence `seq` (consecutive
// positions); keys are positions [0, kv_end), kv_end = position of the last token + 1.
struct PrefillTile {
  int32_t seq;
  int32_t token_begin;
  int32_t num_tokens;
  int32_t kv_end;
};

// Rows (token, query head) of one prefill tile on the tensor-core path: a tile holds
// kPrefillTileRows / group consecutive query tokens of one sequence.
constexpr int kPrefillTileRows = 64;

// A token whose context was split: its partial rows are [first_partial, + num_partials).
struct SplitToken {
  int32_t token;
  int32_t first_partial;
  int32_t num_partials;
  int32_t unused;
};

// kGeneric: CUDA cores, any dtype, head_dim <= 256, items cover every token.
// kTensorCore: mma.sync, bf16/f16 (the cache of the same type), head_dim 64 or 128; items
// cover decode tokens only and tiles cover prefill tokens.
enum class AttentionPath : int32_t { kGeneric, kTensorCore };

struct PagedAttentionParams {
  const void* q = nullptr;                // [num_tokens, q_stride]: head h at h * head_dim
  void* out = nullptr;                    // [num_tokens, out_stride]: like q
  const void* k_cache = nullptr;          // [num_blocks, block_size, num_kv_heads, head_dim]
  const void* v_cache = nullptr;          // [num_blocks, block_size, num_kv_heads, head_dim]
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  const int32_t* positions = nullptr;     // [num_tokens]
  const AttentionItem* items = nullptr;   // [num_items]
  const PrefillTile* tiles = nullptr;     // [num_tiles]
  const SplitToken* splits = nullptr;     // [num_splits]
  float* partial_out = nullptr;           // [num_partials, num_heads, head_dim]: O / l
  float* partial_ml = nullptr;            // [num_partials, num_heads, 2]: (m, l), m in log2 units
  DType dtype = DType::kBF16;             // of q and out
  DType kv_dtype = DType::kBF16;          // of the cache: dtype, or (kGeneric) f32/f16/bf16/fp8
  float kv_scale = 1.f;                   // a cached element stands for value * kv_scale
  AttentionPath path = AttentionPath::kGeneric;
  int64_t q_stride = 0;
  int64_t out_stride = 0;
  int32_t num_items = 0;
  int32_t num_tiles = 0;
  int32_t num_splits = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;  // divides num_heads; query head h reads KV head h / group
  int32_t head_dim = 0;
  int32_t log2_block_size = 0;
  int32_t max_blocks_per_seq = 0;
  float scale_log2 = 0.f;  // softmax scale * log2(e): scores are kept in log2 units
};

// Queues the attention kernels (and the split-KV reduction) on `stream`. Returns
// cudaErrorInvalidValue for a shape the chosen path does not support, else the launch error.
cudaError_t LaunchPagedAttention(const PagedAttentionParams& p, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
