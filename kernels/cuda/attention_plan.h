// The per-batch attention plan: which kernel path a shape takes, and how the batch's query
// tokens become kernel work (decode items, split-KV partitions, prefill tiles). Built on
// the host once per step and reused by every layer.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/batch.h"
#include "kernels/cuda/paged_attention.cuh"

namespace pagoda::kernels::cuda {

// What the choice of kernel path depends on.
struct AttentionShape {
  DType dtype = DType::kBF16;     // of q and out
  DType kv_dtype = DType::kBF16;  // of the cache
  int32_t head_dim = 0;
  int32_t block_size = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  bool aligned = false;        // q, out and cache 16-byte aligned, q/out strides even
  bool force_generic = false;  // always take the CUDA-core kernel
};

// The path for `shape`: tensor cores for bf16/f16 with a cache of the same type or fp8 and
// head_dim 64 or 128 (aligned, group <= 64), else the CUDA-core kernel. InvalidArgument when
// num_heads is not a multiple of num_kv_heads; Unimplemented for block_size not a power of two in
// [1, 256] or head_dim outside [2, 256] (odd head_dim also).
absl::StatusOr<AttentionPath> ChooseAttentionPath(const AttentionShape& shape);

struct AttentionPlanOptions {
  AttentionPath path = AttentionPath::kGeneric;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t num_blocks = 0;  // of the cache, to check block tables
  int32_t block_size = 0;
  int32_t num_sms = 132;  // multiprocessors of the device
  // Split-KV partition in tokens: < 0 lets ChooseSplitPartition decide, 0 never splits, > 0
  // forces that size (rounded up to a multiple of 16).
  int32_t split_partition = -1;
};

struct AttentionPlan {
  std::vector<AttentionItem> items;  // decode items first, then (generic path) prefill tokens
  int32_t num_decode_items = 0;
  std::vector<PrefillTile> tiles;  // tensor-core path only
  std::vector<SplitToken> splits;
  int32_t num_partials = 0;
  int32_t partition_size = 0;  // split-KV partition chosen; 0 = nothing split
  // No-op entries (token -1) at the end of items and splits, added by PadPlanForGraphs;
  // the kernels skip them.
  int32_t padding_items = 0;
  int32_t padding_splits = 0;
};

// The split-KV partition size (tokens, 0 = no split) for decode tokens with contexts
// `contexts` when each item occupies `blocks_per_item` thread blocks. Splits only when the
// unsplit items fill less than one wave of `num_sms`, aiming at two waves; the partition is a
// power of two, at least 128 tokens and at least 1/32 of the longest context.
int32_t ChooseSplitPartition(const std::vector<int32_t>& contexts, int32_t blocks_per_item,
                             int32_t num_sms);

// Thread blocks one item occupies on `path` (for ChooseSplitPartition).
int32_t BlocksPerItem(AttentionPath path, int32_t num_heads, int32_t num_kv_heads);

// n rounded up to a graph bucket: a power of two up to 8, then four steps per power of two
// (9..16 -> 10, 12, 14, 16; 17..32 -> 20, 24, 28, 32), so padding wastes under a quarter.
int32_t GraphBucket(int32_t n);

// The smallest power of two >= n (n >= 1; 1 for n <= 1).
int32_t RoundUpPow2(int32_t n);

// Pads the plan of a decode-only batch of `num_seqs` sequences so that its sizes (the grid
// sizes a CUDA graph bakes in) depend on the batch size and the bucket of its work alone,
// not on each step's contexts: when something was split, items grow to GraphBucket of their
// count (and partial rows to as many) and splits to `num_seqs`, with no-op entries. A plan
// with nothing split already has one item per sequence and is left alone, as is any plan
// with prefill work.
void PadPlanForGraphs(int32_t num_seqs, AttentionPlan* plan);

// The plan of `batch`. InvalidArgument when a token's position lies outside its block table
// or a block id needed lies outside the cache.
absl::StatusOr<AttentionPlan> BuildAttentionPlan(const BatchInput& batch,
                                                 const AttentionPlanOptions& options);

}  // namespace pagoda::kernels::cuda
