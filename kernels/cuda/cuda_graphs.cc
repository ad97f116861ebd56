// CUDA graphs of decode steps: CudaBackend::RunRecordable and the GraphCache.
//
// A decode step launches 13-15 kernels per layer; as a graph they go to the device in one
// launch. The batch metadata and the attention plan are uploaded before the graph runs
// (PrepareBatch, and EnsurePlan here, outside any capture) into buffers whose addresses
// the graph has baked in, so a replay reads the new step's contents. Everything else the
// kernels read is fixed by the caller's key (tensors, cache, parameters) and the shapes in
// GraphKey. Host-side checks of the ops (shapes, slots) run at capture only; the model
// validates each batch before it reaches the backend.
#include <algorithm>

#include "kernels/cuda/cuda_backend_impl.h"

namespace pagoda::kernels::cuda {

int32_t GraphBatchSize(int32_t num_seqs) {
  if (num_seqs <= 2) return num_seqs;
  if (num_seqs <= 4) return 4;
  if (num_seqs <= 512) return (num_seqs + 7) / 8 * 8;
  return num_seqs;
}

int32_t CudaBackend::RecordableBatchSize(int32_t num_seqs) const {
  return options_.graphs ? GraphBatchSize(num_seqs) : num_seqs;
}

GraphCache::Entry* GraphCache::Find(const GraphKey& key) {
  for (auto& [k, e] : entries_) {
    if (k == key) {
      e.last_used = ++clock_;
      return &e;
    }
  }
  return nullptr;
}

void GraphCache::Add(const GraphKey& key, Entry entry) {
  if (entries_.size() >= kMaxGraphs) {
    auto oldest = std::min_element(
        entries_.begin(), entries_.end(),
        [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
    cudaGraphExecDestroy(oldest->second.exec);
    entries_.erase(oldest);
  }
  entry.last_used = ++clock_;
  entries_.emplace_back(key, entry);
}

void GraphCache::MarkFailed(const GraphKey& key) {
  if (failed_.size() >= kMaxGraphs) failed_.erase(failed_.begin());
  failed_.push_back(key);
}

bool GraphCache::Failed(const GraphKey& key) const {
  return std::find(failed_.begin(), failed_.end(), key) != failed_.end();
}

void GraphCache::Clear() {
  for (auto& [k, e] : entries_) cudaGraphExecDestroy(e.exec);
  entries_.clear();
  failed_.clear();
}

absl::Status CudaBackend::RunRecordable(uint64_t key, absl::FunctionRef<void()> ops) {
  CudaGraphCounts& counts = graphs_.counts();
  const auto eager = [&] {
    ++counts.eager;
    ops();
    return absl::OkStatus();
  };
  // Decode batches only (one query token per sequence), once some Attention has set the
  // plan's key, and only while nothing has failed.
  if (!options_.graphs || !has_batch_ || !have_plan_key_ || !status_.ok() ||
      batch_.num_tokens() != batch_.num_seqs()) {
    return eager();
  }
  // The step's attention plan, built and uploaded now: a capture cannot upload.
  if (!EnsurePlan(plan_key_).ok()) return eager();  // the ops will report the cause
  GraphKey k;
  k.ops_key = key;
  k.num_tokens = batch_.num_tokens();
  k.num_seqs = batch_.num_seqs();
  k.block_stride = dev_batch_.block_stride;
  k.num_logits = batch_.num_logits();
  k.plan_items = static_cast<int32_t>(plan_.items.size());
  k.plan_tiles = static_cast<int32_t>(plan_.tiles.size());
  k.plan_splits = static_cast<int32_t>(plan_.splits.size());
  k.plan_partials = plan_.num_partials;
  const int32_t plan_fields[6] = {static_cast<int32_t>(plan_key_.path),
                                  plan_key_.num_heads,
                                  plan_key_.num_kv_heads,
                                  plan_key_.num_blocks,
                                  plan_key_.block_size,
                                  plan_key_.head_dim};
  std::copy(std::begin(plan_fields), std::end(plan_fields), k.plan_fields);
  k.batch_arena = batch_upload_.device();
  k.plan_arena = plan_upload_.device();
  // Read only by split steps: a step with nothing split keeps its graph when it grows.
  k.partials = plan_.num_partials > 0 ? partials_.data() : nullptr;
  if (GraphCache::Entry* e = graphs_.Find(k)) {
    RecordLaunch(cudaGraphLaunch(e->exec, stream_), "graph launch");
    ++counts.replays;
    const int64_t calls = trace_.calls + e->attention_calls;
    trace_ = e->trace;
    trace_.calls = calls;
    // Padded steps of one bucket share a graph: the counts are this step's plan's.
    if (e->attention_calls > 0) SetPlanTrace();
    return absl::OkStatus();
  }
  if (graphs_.Failed(k)) return eager();
  if (!CaptureAndLaunch(k, ops)) {
    ++counts.failed;
    graphs_.MarkFailed(k);
    return eager();
  }
  ++counts.captures;
  return absl::OkStatus();
}

bool CudaBackend::CaptureAndLaunch(const GraphKey& key, absl::FunctionRef<void()> ops) {
  const CudaAttentionTrace trace_before = trace_;
  // Thread-local: other threads' CUDA calls neither join nor break the capture.
  if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  capturing_ = true;
  ops();
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  cudaGraphExec_t exec = nullptr;
  bool ok = end == cudaSuccess && graph != nullptr && status_.ok() &&
            cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  if (graph != nullptr) cudaGraphDestroy(graph);
  ok = ok && cudaGraphLaunch(exec, stream_) == cudaSuccess;
  if (!ok) {
    // Nothing ran: what the ops recorded was about the capture, and they run again.
    cudaGetLastError();
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    status_ = absl::OkStatus();
    trace_ = trace_before;
    return false;
  }
  graphs_.Add(
      key, {.exec = exec, .trace = trace_, .attention_calls = trace_.calls - trace_before.calls});
  return true;
}

}  // namespace pagoda::kernels::cuda
