// The CUDA backend class, internal to kernels/cuda (everything else goes through
// cuda_backend.h). Memory, batch upload and the factory live in cuda_backend.cc, the
// operators in cuda_ops.cc.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <string_view>

#include "kernels/backend.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_graphs.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/host_reader.h"

namespace pagoda::kernels::cuda {

class CudaBackend final : public Backend {
 public:
  // A backend on `device` (already checked usable). Internal/Unavailable on CUDA failures.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(int device,
                                                             const CudaOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  DType activation_dtype() const override { return options_.dtype; }
  DType kv_dtype() const override { return options_.dtype; }
  // The activation type, f32, f16, bf16 or fp8 (e4m3, a per-tensor scale): WriteKv converts,
  // attention reads the stored type (other than the activation type: CUDA-core kernel).
  bool SupportsKvDtype(DType dtype) const override {
    return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
           dtype == DType::kF8E4M3;
  }

  absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) override;
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override;
  // Page-locked (cudaHostAlloc), so CopyHostAsync is a true asynchronous copy on the stream.
  absl::StatusOr<DeviceBuffer> AllocateHost(size_t bytes) override;
  absl::Status CopyHostAsync(void* dst, const void* src, size_t bytes, bool to_host) override;
  // One cudaMemcpyBatchAsync (per-copy cudaMemcpyAsync where the driver lacks it).
  absl::Status CopyHostBatchAsync(absl::Span<const HostCopy> copies, bool to_host) override;
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::StatusOr<OwnedTensor> CreateWeight(const float* host, int64_t rows, int64_t cols) override;
  absl::Status ReadF32(const Tensor& x, float* host) override;
  absl::Status Synchronize() override;
  absl::Status PrepareBatch(const BatchInput& batch) override;
  // Decode batches (one query token per sequence) as CUDA graphs: the first call of a shape
  // captures `ops` and launches the graph, later ones replay it (cuda_graphs.cc).
  absl::Status RunRecordable(uint64_t key, absl::FunctionRef<void()> ops) override;
  int32_t RecordableBatchSize(int32_t num_seqs) const override;

  void Embed(const Tensor& table, const Tensor& out) override;
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override;
  void MatMul(const Tensor& x, const Tensor& w, const Tensor& out) override;
  void Rope(const Tensor& q, const Tensor& k, const RopeParams& params) override;
  void SiluMul(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void Add(const Tensor& x, const Tensor& y) override;
  void AddBias(const Tensor& x, const Tensor& bias) override;
  void WriteKv(const Tensor& k, const Tensor& v, const PagedKvCache& cache, int32_t layer) override;
  void Attention(const Tensor& q, const PagedKvCache& cache, int32_t layer,
                 const AttentionParams& params, const Tensor& out) override;
  void GatherLogitRows(const Tensor& x, const Tensor& out) override;

  // See CudaArgmaxRows / CudaSoftmaxRows in cuda_backend.h.
  absl::Status ArgmaxRows(const Tensor& logits, int32_t* host_ids);
  absl::Status SoftmaxRows(const Tensor& logits, float temperature, const Tensor& probs);
  // The plan the last Attention call used (for tests and benchmarks).
  const AttentionPlan& last_plan() const { return plan_; }
  // What the last queued Attention ran (see CudaLastAttention).
  const CudaAttentionTrace& last_attention() const { return trace_; }
  // How ReadF32 copies reached the host (see CudaLastReads).
  CudaReadCounts read_counts() const { return {reader_.direct_reads(), reader_.staged_reads()}; }
  // What RunRecordable did (see CudaGraphStats).
  CudaGraphCounts graph_counts() const { return graphs_.counts(); }
  // How swap copies were queued (see CudaHostCopyCounts).
  CudaHostCopyCounts host_copy_counts() const { return host_copies_; }

 private:
  // Device copies of the prepared batch's arrays.
  struct DeviceBatch {
    const int32_t* token_ids = nullptr;
    const int32_t* positions = nullptr;
    const int32_t* slot_mapping = nullptr;
    const int32_t* block_tables = nullptr;  // rows of block_stride entries
    const int32_t* logits_indices = nullptr;
    // The batch's max_blocks_per_seq rounded up to a power of two (the rows padded with -1),
    // so that a decode step's graph is replayed until a table outgrows the bucket.
    int32_t block_stride = 0;
  };
  // What a plan depends on besides the batch.
  struct PlanKey {
    AttentionPath path = AttentionPath::kGeneric;
    int32_t num_heads = 0;
    int32_t num_kv_heads = 0;
    int32_t num_blocks = 0;
    int32_t block_size = 0;
    int32_t head_dim = 0;
    bool operator==(const PlanKey&) const = default;
  };

  CudaBackend(int device, const CudaOptions& options, cudaStream_t stream, cublasHandle_t cublas,
              void* cublas_workspace, int num_sms);
  // Keeps the first failure until Synchronize, ReadF32 or CopyToHost reports it.
  void Record(absl::Status status);
  // Records a launch error of op `op`.
  void RecordLaunch(cudaError_t err, const char* op);
  // False (and a recorded FailedPrecondition) when no batch has been prepared.
  bool HaveBatch(const char* op);
  // Waits for the stream and returns (and clears) the first failure.
  absl::Status SyncAndTakeStatus();
  // Builds and uploads the plan of the current batch for `key` unless it is current.
  // FailedPrecondition while capturing a graph (the upload would wait on the stream).
  absl::Status EnsurePlan(const PlanKey& key);
  // Captures `ops` into a graph stored under `key` and launches it; false (nothing queued,
  // the backend as before) when the capture failed.
  bool CaptureAndLaunch(const GraphKey& key, absl::FunctionRef<void()> ops);
  // Sets the trace's work counts from the current plan (at each Attention, and at a replay,
  // whose graph may have been captured from a step with other real counts in one bucket).
  void SetPlanTrace();

  int device_;
  CudaOptions options_;
  cudaStream_t stream_;
  cublasHandle_t cublas_;
  void* cublas_workspace_;
  int num_sms_;
  absl::Status status_;

  BatchInput batch_;  // host copy of the prepared batch
  bool has_batch_ = false;
  DeviceBatch dev_batch_;
  UploadBuffer batch_upload_;
  std::vector<int32_t> padded_tables_;  // block tables at dev_batch_.block_stride

  bool plan_current_ = false;
  bool have_plan_key_ = false;  // plan_key_ was set by some Attention
  PlanKey plan_key_;
  AttentionPlan plan_;
  const AttentionItem* dev_items_ = nullptr;
  const PrefillTile* dev_tiles_ = nullptr;
  const SplitToken* dev_splits_ = nullptr;
  UploadBuffer plan_upload_;
  ScratchBuffer partials_;  // split-KV partial rows
  CudaAttentionTrace trace_;

  ScratchBuffer convert_;  // fp32 staging of CreateWeight and ReadF32
  HostReader reader_;      // pinned device-to-host path of ReadF32
  ScratchBuffer ids_;      // argmax results
  CudaHostCopyCounts host_copies_;
  GraphCache graphs_;
  bool capturing_ = false;
  bool batch_copy_unsupported_ = false;  // the driver refused cudaMemcpyBatchAsync once
};

}  // namespace pagoda::kernels::cuda
