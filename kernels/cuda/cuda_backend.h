// Entry points of the CUDA backend. This header includes no CUDA header, so plain C++
// (the backend factory) can call it.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace pagoda::kernels {

// Settings of the CUDA backend beyond BackendOptions.
struct CudaOptions {
  // Element type of activations, weights and the KV cache: kF32 (exact, CUDA cores only),
  // kBF16 (default) or kF16.
  DType dtype = DType::kBF16;
  // Always use the CUDA-core attention kernel, even where the tensor-core one applies.
  bool generic_attention = false;
  // Split-KV partition in tokens: < 0 chosen per batch, 0 never split, > 0 forced.
  int32_t split_kv_partition = -1;
  // Decode steps as CUDA graphs: captured per batch size and bucket of block-table width and
  // split work, replayed (Backend::RunRecordable).
  // PAGODA_CUDA_GRAPHS=off in the environment turns them off in every backend whatever
  // this says (so whole test binaries run both ways).
  bool graphs = true;
  // Products of 1 or 2 rows (decode steps of one or two sequences) with pagoda's own 16-bit
  // matrix-vector kernel (kernels/cuda/gemv.cuh) instead of cuBLAS. PAGODA_CUDA_GEMV=off in
  // the environment turns it off in every backend (to measure or rule it out).
  bool gemv = true;
};

// OK when a CUDA device can be used; otherwise Unavailable with the reason.
absl::Status CudaDeviceAvailable();
// CudaOptions from `options`' cuda_dtype (f32|bf16|f16), cuda_attention (auto|generic),
// cuda_split_kv (auto|off|<tokens>) and cuda_graphs (on|off), each taken, when empty, from the
// environment variable PAGODA_CUDA_DTYPE / _ATTENTION / _SPLIT_KV / _GRAPHS. InvalidArgument
// naming the flag or the variable for a value outside those.
absl::StatusOr<CudaOptions> CudaOptionsFrom(const BackendOptions& options);
// CudaOptionsFrom with no flag set: the environment alone.
absl::StatusOr<CudaOptions> CudaOptionsFromEnv();
// A backend on device `options.device_index` with CudaOptionsFrom(options); Unavailable
// when there is no usable device.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options);
// As above with explicit CUDA settings.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options,
                                                           const CudaOptions& cuda);

// ids[r] = index of the largest element of row r of `logits` (first one on ties), copied to
// the host. `backend` must be a CUDA backend holding `logits`; InvalidArgument otherwise.
absl::Status CudaArgmaxRows(Backend* backend, const Tensor& logits, int32_t* host_ids);
// probs [rows, cols] fp32 (backend memory) = softmax(logits / temperature) per row, queued.
// InvalidArgument for a non-CUDA backend, mismatched shapes or temperature <= 0.
absl::Status CudaSoftmaxRows(Backend* backend, const Tensor& logits, float temperature,
                             const Tensor& probs);

// What the last successfully queued Attention of a CUDA backend ran (a test hook).
struct CudaAttentionTrace {
  int64_t calls = 0;          // Attention calls queued since the backend was created
  bool tensor_core = false;   // tensor-core kernels (false: the CUDA-core kernel)
  int32_t decode_items = 0;   // decode work items (one per split partition)
  int32_t prefill_tiles = 0;  // prefill tiles (tensor-core path; 0 on the generic path)
  int32_t split_tokens = 0;   // decode tokens whose context was split and merged
};
// The trace of `backend`; InvalidArgument when it is not a CUDA backend.
absl::StatusOr<CudaAttentionTrace> CudaLastAttention(const Backend* backend);

// How ReadF32 reached the host so far (a test hook): never by a DMA into pageable memory.
struct CudaReadCounts {
  int64_t direct = 0;  // one asynchronous copy straight into pinned host memory
  int64_t staged = 0;  // through the pinned staging chunks into pageable host memory
};
// The counts of `backend`; InvalidArgument when it is not a CUDA backend.
absl::StatusOr<CudaReadCounts> CudaLastReads(const Backend* backend);

// What RunRecordable did so far (a test hook).
struct CudaGraphCounts {
  int64_t captures = 0;  // graphs captured (and launched)
  int64_t replays = 0;   // graphs replayed
  int64_t eager = 0;     // calls that ran the ops directly (graphs off, not a decode batch,
                         // no attention plan yet, the cache of graphs full, a failed capture)
  int64_t failed = 0;    // captures abandoned (then run directly)
};
// The counts of `backend`; InvalidArgument when it is not a CUDA backend.
absl::StatusOr<CudaGraphCounts> CudaGraphStats(const Backend* backend);

// How CopyHostAsync / CopyHostBatchAsync queued host copies so far (a test hook).
struct CudaHostCopyCounts {
  int64_t batches = 0;  // driver calls: one per CopyHostAsync, one per batch
  int64_t copies = 0;   // byte ranges copied
};
// The counts of `backend`; InvalidArgument when it is not a CUDA backend.
absl::StatusOr<CudaHostCopyCounts> CudaHostCopies(const Backend* backend);

}  // namespace pagoda::kernels
