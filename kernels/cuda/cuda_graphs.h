// CUDA graphs of decode steps: what a captured step depends on (GraphKey) and the captured
// steps themselves (GraphCache). CudaBackend::RunRecordable (cuda_graphs.cc) captures a
// decode step's ops the first time a shape comes, and replays the graph afterwards.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_backend.h"

namespace pagoda::kernels::cuda {

// Everything a captured step's kernels read that a later step must share to replay it:
// the caller's key (its tensors, cache and parameters), the batch's and the attention
// plan's shapes (grid sizes and parameters are baked into the graph), the plan's key, and
// the device addresses of the per-step uploads (whose contents change, not their place).
struct GraphKey {
  uint64_t ops_key = 0;
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t block_stride = 0;  // of the uploaded block tables (a power of two)
  int32_t num_logits = 0;
  int32_t plan_items = 0;
  int32_t plan_tiles = 0;
  int32_t plan_splits = 0;
  int32_t plan_partials = 0;
  int32_t plan_fields[6] = {};  // CudaBackend::PlanKey: path, heads, KV heads, blocks, ...
  const void* batch_arena = nullptr;
  const void* plan_arena = nullptr;
  const void* partials = nullptr;

  bool operator==(const GraphKey&) const = default;
};

// The batch size a plain decode step of `num_seqs` sequences is padded to when graphs are
// on (Backend::RecordableBatchSize): 1, 2, 4, then multiples of 8 up to 512; larger batches
// are not padded. A padding row costs a GEMM row; decode GEMMs read weights, not rows.
int32_t GraphBatchSize(int32_t num_seqs);

// The graphs captured so far, at most kMaxGraphs (the least recently used one goes first).
class GraphCache {
 public:
  static constexpr size_t kMaxGraphs = 64;

  struct Entry {
    cudaGraphExec_t exec = nullptr;
    CudaAttentionTrace trace;     // the trace after the captured step's last Attention
    int64_t attention_calls = 0;  // Attention calls in the step
    uint64_t last_used = 0;
  };

  GraphCache() = default;
  ~GraphCache() { Clear(); }
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // The entry of `key` (marked used), or nullptr.
  Entry* Find(const GraphKey& key);
  // Stores `entry` under `key`, destroying the least recently used graph when full.
  void Add(const GraphKey& key, Entry entry);
  // Destroys every graph.
  void Clear();
  // Remembers that capturing `key` failed (at most kMaxGraphs keys, the oldest forgotten), so
  // that RunRecordable runs such steps directly instead of trying again each time.
  void MarkFailed(const GraphKey& key);
  bool Failed(const GraphKey& key) const;

  CudaGraphCounts& counts() { return counts_; }
  const CudaGraphCounts& counts() const { return counts_; }

 private:
  std::vector<std::pair<GraphKey, Entry>> entries_;
  std::vector<GraphKey> failed_;
  uint64_t clock_ = 0;
  CudaGraphCounts counts_;
};

}  // namespace pagoda::kernels::cuda
