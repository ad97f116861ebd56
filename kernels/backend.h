// The Backend interface: memory and the operators the Llama forward pass is written
// against. The CPU backend implements it with OpenBLAS and threads; the CUDA backend with
// kernels and cuBLAS. Tensors are views of memory the backend allocated (device memory
// on a GPU); ops are queued in order and may run asynchronously until a copy to the host
// or Synchronize(), which report any failure.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/batch.h"
#include "kernels/cpu_isa.h"
#include "kernels/kv_cache.h"
#include "kernels/rope.h"
#include "kernels/tensor.h"

namespace pagoda::kernels {

// One copy of a CopyHostBatchAsync batch.
struct HostCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

struct AttentionParams {
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;  // query head h reads KV head h / (num_heads / num_kv_heads)
  int32_t head_dim = 0;
  float scale = 1.f;  // usually 1 / sqrt(head_dim)
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual std::string name() const = 0;
  // Element type the model keeps activations in, and the KV cache's default type.
  virtual DType activation_dtype() const = 0;
  virtual DType kv_dtype() const = 0;
  // True when WriteKv/Attention work on a cache of `dtype` (kv_dtype() always).
  virtual bool SupportsKvDtype(DType dtype) const { return dtype == kv_dtype(); }

  // Backend memory of `bytes` bytes (uninitialized); ResourceExhausted when out of memory.
  virtual absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) = 0;
  // A contiguous [rows, cols] tensor of `dtype` in fresh backend memory.
  absl::StatusOr<OwnedTensor> AllocateTensor(DType dtype, int64_t rows, int64_t cols);
  // Host-to-backend and backend-to-host copies of raw bytes; the latter waits for queued ops.
  virtual absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  // Host memory of `bytes` bytes that KV blocks are swapped out to: page-locked on CUDA, so
  // swap copies run asynchronously at bus speed. The default is ordinary host memory.
  virtual absl::StatusOr<DeviceBuffer> AllocateHost(size_t bytes);
  // Queues a copy of `bytes` between backend memory and AllocateHost memory (`to_host`:
  // backend to host), in order with the ops and without waiting; the host side must stay
  // untouched until Synchronize(), which reports a failure. The default copies at once.
  virtual absl::Status CopyHostAsync(void* dst, const void* src, size_t bytes, bool to_host);
  // Queues `copies`, all in the direction `to_host`, as CopyHostAsync would each, but as one
  // batch (one driver call on CUDA): they must not overlap one another, since they may run in
  // any order among themselves (in order with the ops before and after). The default calls
  // CopyHostAsync for each.
  virtual absl::Status CopyHostBatchAsync(absl::Span<const HostCopy> copies, bool to_host);
  // Sets every byte of `bytes` at `dst` to zero.
  virtual absl::Status Zero(void* dst, size_t bytes) = 0;
  // Stores a weight given as host fp32 [rows, cols] in the backend's weight format.
  virtual absl::StatusOr<OwnedTensor> CreateWeight(const float* host, int64_t rows,
                                                   int64_t cols) = 0;
  // Stores a weight given as the raw host bytes of a [rows, cols] matrix of `type` (GGUF
  // layout: each row is cols / DTypeBlockElems(type) blocks). The default dequantizes to
  // fp32 on the host and calls CreateWeight; the CPU backend keeps the bytes as they are.
  // InvalidArgument when cols is not a whole number of blocks or `type` is activation-only.
  virtual absl::StatusOr<OwnedTensor> CreateWeightRaw(DType type, const void* data, int64_t rows,
                                                      int64_t cols);
  // Called at load for a weight the model passes to MatMul as `w` and to nothing else but
  // ReadF32: the backend may re-lay it out for its matmul kernels, replacing *weight (its
  // buffer, data and dtype; same rows and cols). The default keeps it as it is.
  virtual absl::Status PrepareMatMulWeight(OwnedTensor* /*weight*/) { return absl::OkStatus(); }
  // Copies a tensor of any dtype to host fp32 [rows, cols], waiting for queued ops.
  virtual absl::Status ReadF32(const Tensor& x, float* host) = 0;
  // Waits for queued ops and reports the first failure since the last call.
  virtual absl::Status Synchronize() = 0;
  // Tells the backend the role of a weight the model created ("qkv", "o", "gate_up", "down",
  // "lm_head"), for profiling; called at load only. The default ignores it.
  virtual void NameWeight(const Tensor& /*weight*/, std::string_view /*role*/) {}

  // Makes `batch` the batch the ops below read (token ids, positions, slot mapping, block
  // tables). Its metadata stays valid on the backend until the next PrepareBatch.
  virtual absl::Status PrepareBatch(const BatchInput& batch) = 0;
  // Runs `ops`, which queue the ops of one forward pass over the prepared batch. A backend
  // that records (CUDA graphs) may instead replay what an earlier call queued, when the
  // prepared batch has the shape of that call's and `key` is the same: `key` is the
  // caller's word that `ops` would queue the same ops on the same tensors and cache with
  // the same parameters (it must change with any of them). Failures are reported as the
  // ops' are. The default calls ops().
  virtual absl::Status RunRecordable(uint64_t /*key*/, absl::FunctionRef<void()> ops) {
    ops();
    return absl::OkStatus();
  }
  // How many sequences a plain decode step of `num_seqs` should be padded to
  // (PadDecodeBatch) before it goes through RunRecordable, so that steps of nearby batch
  // sizes share one recording. The default (no recording) is `num_seqs`: no padding.
  virtual int32_t RecordableBatchSize(int32_t num_seqs) const { return num_seqs; }

  // out[i] = table[token_ids[i]] for each batch token. table [vocab, dim], out [num_tokens, dim].
  virtual void Embed(const Tensor& table, const Tensor& out) = 0;
  // out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight. x, out [n, dim]; weight [1, dim].
  virtual void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) = 0;
  // out = x * w^T. x [n, k], w [m, k] (a weight), out [n, m].
  virtual void MatMul(const Tensor& x, const Tensor& w, const Tensor& out) = 0;
  // Rotates q [n, num_heads * head_dim] and k [n, num_kv_heads * head_dim] in place by the
  // batch positions as ggml_rope_ext does: adjacent pairs (2i, 2i+1) as GGUF's `llama`
  // layout stores them, or NEOX pairs (i, i + rope_dim/2) when params.neox.
  virtual void Rope(const Tensor& q, const Tensor& k, const RopeParams& params) = 0;
  // out = silu(gate) * up, elementwise. gate, up, out [n, ffn].
  virtual void SiluMul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  // x += y, elementwise. x, y [n, dim].
  virtual void Add(const Tensor& x, const Tensor& y) = 0;
  // x[r] += bias[0] for every row r. x [n, d] of any dtype, bias [1, d] f32.
  virtual void AddBias(const Tensor& x, const Tensor& bias) = 0;
  // Writes k, v [num_tokens, num_kv_heads * head_dim] of the batch tokens into `layer` of the
  // cache at their slot_mapping slots.
  virtual void WriteKv(const Tensor& k, const Tensor& v, const PagedKvCache& cache,
                       int32_t layer) = 0;
  // Causal attention of each batch query token over its sequence's cached K/V at positions
  // <= its own, reached only through the block table. q [num_tokens, num_heads * head_dim],
  // out [num_tokens, num_heads * head_dim].
  virtual void Attention(const Tensor& q, const PagedKvCache& cache, int32_t layer,
                         const AttentionParams& params, const Tensor& out) = 0;
  // out[j] = x[logits_indices[j]]. x [num_tokens, d], out [num_logits, d].
  virtual void GatherLogitRows(const Tensor& x, const Tensor& out) = 0;
};

// OK when a [rows, cols] weight of `type` is storable: a weight type (not Q8_1/Q8_K) and
// rows of whole blocks; otherwise InvalidArgument naming the cause.
absl::Status ValidateWeightShape(DType type, int64_t rows, int64_t cols);

enum class DeviceKind { kAuto, kCpu, kCuda };

struct BackendOptions {
  DeviceKind device = DeviceKind::kAuto;
  int32_t num_threads = 0;     // CPU threads; 0 = one per hardware thread
  int32_t device_index = 0;    // CUDA device
  bool cpu_blas_only = false;  // CPU: every f32 product through OpenBLAS (A/B comparisons)
  // CPU: the instruction-set level the kernels run at (--cpu-isa), at most the CPU's own.
  // Process-wide (cpu_isa.h): creating a CPU backend sets it; unset leaves it as it is (the
  // CPU's own unless capped).
  std::optional<CpuIsa> cpu_isa;
  // CUDA settings (docs/GPU.md), as the flags --cuda-dtype (f32, bf16, f16),
  // --cuda-attention (auto, generic), --cuda-split-kv (auto, off, tokens) and --cuda-graphs
  // (on, off) spell them; "" takes the environment variable PAGODA_CUDA_DTYPE / _ATTENTION /
  // _SPLIT_KV / _GRAPHS, and when that is unset too the default (bf16, auto, auto, on).
  std::string cuda_dtype;
  std::string cuda_attention;
  std::string cuda_split_kv;
  std::string cuda_graphs;
};

// Whether this build has the CUDA backend (PAGODA_CUDA at configure time).
bool CudaBuiltIn();

// Builds the requested backend; kAuto picks CUDA when a device is present, else CPU.
// Unavailable when CUDA is asked for but not built in or no device is present.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

}  // namespace pagoda::kernels
