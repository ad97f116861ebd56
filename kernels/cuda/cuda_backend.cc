// The CUDA backend: device, stream, cuBLAS handle, memory, batch upload and the factory.
// The operators are in cuda_ops.cc.
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/gather_rows.cuh"

namespace pagoda::kernels {
namespace {

// cuBLAS's workspace (what it picks by default on Hopper), set by us so that GEMMs captured
// into a graph allocate nothing.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

// Value of environment variable `name`, or "" when unset.
std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// Fills 16-byte aligned int32 sections of `base`, returning each section's start.
class Packer {
 public:
  explicit Packer(char* base) : base_(base) {}
  // Appends `count` elements of `data`; returns their offset in bytes.
  template <typename T>
  size_t Add(const T* data, size_t count) {
    const size_t at = size_;
    if (base_ != nullptr && count > 0) std::memcpy(base_ + at, data, count * sizeof(T));
    size_ += (count * sizeof(T) + 15) / 16 * 16;
    return at;
  }
  size_t size() const { return size_; }

 private:
  char* base_;
  size_t size_ = 0;
};

}  // namespace

absl::Status CudaDeviceAvailable() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("no usable CUDA device: ", cudaGetErrorString(err)));
  }
  if (count == 0) return absl::UnavailableError("no CUDA device present");
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major < 8) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device 0 has compute capability ", major, ".x; pagoda needs 8.0+"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CudaOptions> CudaOptionsFrom(const BackendOptions& options) {
  // The flag's value when given, else the environment's; `where` names the source.
  struct Setting {
    std::string value;
    std::string where;
  };
  const auto setting = [](const std::string& flag_value, const char* flag, const char* env) {
    if (!flag_value.empty()) return Setting{flag_value, absl::StrCat(flag, " ", flag_value)};
    const std::string value = Env(env);
    return Setting{value, absl::StrCat(env, "=", value)};
  };
  CudaOptions o;
  const Setting dtype = setting(options.cuda_dtype, "--cuda-dtype", "PAGODA_CUDA_DTYPE");
  if (dtype.value == "f32" || dtype.value == "fp32") {
    o.dtype = DType::kF32;
  } else if (dtype.value == "f16" || dtype.value == "fp16") {
    o.dtype = DType::kF16;
  } else if (dtype.value.empty() || dtype.value == "bf16") {
    o.dtype = DType::kBF16;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(dtype.where, ": expected f32, bf16 or f16"));
  }
  const Setting attention =
      setting(options.cuda_attention, "--cuda-attention", "PAGODA_CUDA_ATTENTION");
  if (attention.value == "generic") {
    o.generic_attention = true;
  } else if (!attention.value.empty() && attention.value != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(attention.where, ": expected auto or generic"));
  }
  const Setting split = setting(options.cuda_split_kv, "--cuda-split-kv", "PAGODA_CUDA_SPLIT_KV");
  int32_t tokens = 0;
  if (split.value == "off") {
    o.split_kv_partition = 0;
  } else if (!split.value.empty() && split.value != "auto") {
    if (!absl::SimpleAtoi(split.value, &tokens) || tokens <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(split.where, ": expected auto, off or a partition size in tokens"));
    }
    o.split_kv_partition = tokens;
  }
  const Setting graphs = setting(options.cuda_graphs, "--cuda-graphs", "PAGODA_CUDA_GRAPHS");
  if (graphs.value == "off") {
    o.graphs = false;
  } else if (!graphs.value.empty() && graphs.value != "on") {
    return absl::InvalidArgumentError(absl::StrCat(graphs.where, ": expected on or off"));
  }
  return o;
}

absl::StatusOr<CudaOptions> CudaOptionsFromEnv() { return CudaOptionsFrom(BackendOptions{}); }

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options) {
  absl::StatusOr<CudaOptions> cuda = CudaOptionsFrom(options);
  if (!cuda.ok()) return cuda.status();
  return CreateCudaBackend(options, *cuda);
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options,
                                                           const CudaOptions& cuda) {
  if (absl::Status st = CudaDeviceAvailable(); !st.ok()) return st;
  auto backend = cuda::CudaBackend::Create(options.device_index, cuda);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(std::move(*backend));
}

absl::Status CudaArgmaxRows(Backend* backend, const Tensor& logits, int32_t* host_ids) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(backend);
  if (cuda == nullptr) return absl::InvalidArgumentError("CudaArgmaxRows: not a CUDA backend");
  return cuda->ArgmaxRows(logits, host_ids);
}

absl::Status CudaSoftmaxRows(Backend* backend, const Tensor& logits, float temperature,
                             const Tensor& probs) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(backend);
  if (cuda == nullptr) return absl::InvalidArgumentError("CudaSoftmaxRows: not a CUDA backend");
  return cuda->SoftmaxRows(logits, temperature, probs);
}

absl::StatusOr<CudaAttentionTrace> CudaLastAttention(const Backend* backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(backend);
  if (cuda == nullptr) return absl::InvalidArgumentError("CudaLastAttention: not a CUDA backend");
  return cuda->last_attention();
}

absl::StatusOr<CudaHostCopyCounts> CudaHostCopies(const Backend* backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(backend);
  if (cuda == nullptr) return absl::InvalidArgumentError("CudaHostCopies: not a CUDA backend");
  return cuda->host_copy_counts();
}

absl::StatusOr<CudaGraphCounts> CudaGraphStats(const Backend* backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(backend);
  if (cuda == nullptr) return absl::InvalidArgumentError("CudaGraphStats: not a CUDA backend");
  return cuda->graph_counts();
}

absl::StatusOr<CudaReadCounts> CudaLastReads(const Backend* backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(backend);
  if (cuda == nullptr) return absl::InvalidArgumentError("CudaLastReads: not a CUDA backend");
  return cuda->read_counts();
}

namespace cuda {

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(int device,
                                                                 const CudaOptions& options) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
    return absl::UnavailableError(absl::StrCat("cuda: no device ", device));
  }
  if (absl::Status st = CudaStatus(cudaSetDevice(device), "set device"); !st.ok()) return st;
  int num_sms = 0;
  if (absl::Status st = CudaStatus(
          cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device), "attribute");
      !st.ok()) {
    return st;
  }
  cudaStream_t stream = nullptr;
  if (absl::Status st =
          CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
      !st.ok()) {
    return st;
  }
  // cuBLAS gets its workspace from us, so a GEMM inside a graph capture allocates nothing.
  void* workspace = nullptr;
  cublasHandle_t cublas = nullptr;
  if (cudaMalloc(&workspace, kCublasWorkspaceBytes) != cudaSuccess ||
      cublasCreate(&cublas) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(cublas, stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetWorkspace(cublas, workspace, kCublasWorkspaceBytes) != CUBLAS_STATUS_SUCCESS) {
    cudaGetLastError();
    if (cublas != nullptr) cublasDestroy(cublas);
    if (workspace != nullptr) cudaFree(workspace);
    cudaStreamDestroy(stream);
    return absl::InternalError("cuda: cannot create the cuBLAS handle and its workspace");
  }
  CudaOptions o = options;
  if (Env("PAGODA_CUDA_GRAPHS") == "off") o.graphs = false;
  if (Env("PAGODA_CUDA_GEMV") == "off") o.gemv = false;
  return std::unique_ptr<CudaBackend>(
      new CudaBackend(device, o, stream, cublas, workspace, num_sms));
}

CudaBackend::CudaBackend(int device, const CudaOptions& options, cudaStream_t stream,
                         cublasHandle_t cublas, void* cublas_workspace, int num_sms)
    : device_(device),
      options_(options),
      stream_(stream),
      cublas_(cublas),
      cublas_workspace_(cublas_workspace),
      num_sms_(num_sms) {}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  graphs_.Clear();
  cublasDestroy(cublas_);
  cudaFree(cublas_workspace_);
  cudaStreamDestroy(stream_);
}

void CudaBackend::Record(absl::Status status) {
  if (status_.ok() && !status.ok()) status_ = std::move(status);
}

void CudaBackend::RecordLaunch(cudaError_t err, const char* op) {
  if (err != cudaSuccess) Record(CudaStatus(err, op));
}

bool CudaBackend::HaveBatch(const char* op) {
  if (has_batch_) return true;
  Record(absl::FailedPreconditionError(absl::StrCat("cuda: ", op, " before PrepareBatch")));
  return false;
}

absl::Status CudaBackend::SyncAndTakeStatus() {
  Record(CudaStatus(cudaStreamSynchronize(stream_), "synchronize"));
  absl::Status st = std::move(status_);
  status_ = absl::OkStatus();
  return st;
}

absl::StatusOr<DeviceBuffer> CudaBackend::Allocate(size_t bytes) {
  cudaSetDevice(device_);
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda: cannot allocate ", bytes, " bytes: ", cudaGetErrorString(err)));
  }
  return DeviceBuffer(p, bytes, [](void* q) { cudaFree(q); });
}

absl::Status CudaBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  // Synchronous: `src` may be reused as soon as this returns, even if it is pinned.
  Record(CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "copy"));
  return SyncAndTakeStatus();
}

absl::Status CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  Record(CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy"));
  return SyncAndTakeStatus();
}

absl::StatusOr<DeviceBuffer> CudaBackend::AllocateHost(size_t bytes) {
  cudaSetDevice(device_);
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda: cannot allocate ", bytes,
                     " bytes of pinned host memory: ", cudaGetErrorString(err)));
  }
  return DeviceBuffer(p, bytes, [](void* q) { cudaFreeHost(q); });
}

absl::Status CudaBackend::CopyHostAsync(void* dst, const void* src, size_t bytes, bool to_host) {
  // No wait: the stream orders the copy with the kernels before and after it.
  const cudaMemcpyKind kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
  ++host_copies_.batches;
  ++host_copies_.copies;
  return CudaStatus(cudaMemcpyAsync(dst, src, bytes, kind, stream_), "swap copy");
}

absl::Status CudaBackend::CopyHostBatchAsync(absl::Span<const HostCopy> copies, bool to_host) {
  if (copies.empty()) return absl::OkStatus();
  if (copies.size() == 1 || batch_copy_unsupported_) {
    return Backend::CopyHostBatchAsync(copies, to_host);
  }
#if CUDART_VERSION < 13000
  // CUDA 12.8/12.9 spell cudaMemcpyBatchAsync with another argument list, older ones lack it.
  return Backend::CopyHostBatchAsync(copies, to_host);
#else
  std::vector<void*> dsts(copies.size());
  std::vector<const void*> srcs(copies.size());
  std::vector<size_t> sizes(copies.size());
  for (size_t i = 0; i < copies.size(); ++i) {
    dsts[i] = copies[i].dst;
    srcs[i] = copies[i].src;
    sizes[i] = copies[i].bytes;
  }
  // Both sides are ordinary device or page-locked memory, read in stream order.
  cudaMemcpyAttributes attrs{};
  attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attrs_index = 0;
  const cudaError_t err = cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(),
                                               copies.size(), &attrs, &attrs_index, 1, stream_);
  if (err == cudaErrorNotSupported || err == cudaErrorCallRequiresNewerDriver) {
    // A driver older than CUDA 12.8's: copy by copy from now on.
    cudaGetLastError();
    batch_copy_unsupported_ = true;
    return Backend::CopyHostBatchAsync(copies, to_host);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();  // not left for the next launch's check to find
    return CudaStatus(err, "swap copy batch");
  }
  ++host_copies_.batches;
  host_copies_.copies += static_cast<int64_t>(copies.size());
  return absl::OkStatus();
#endif
}

absl::Status CudaBackend::Zero(void* dst, size_t bytes) {
  return CudaStatus(cudaMemsetAsync(dst, 0, bytes, stream_), "memset");
}

absl::StatusOr<OwnedTensor> CudaBackend::CreateWeight(const float* host, int64_t rows,
                                                      int64_t cols) {
  absl::StatusOr<OwnedTensor> t = AllocateTensor(options_.dtype, rows, cols);
  if (!t.ok()) return t.status();
  const int64_t n = rows * cols;
  if (options_.dtype == DType::kF32) {
    Record(CudaStatus(cudaMemcpyAsync(t->view.data, host, static_cast<size_t>(n) * 4,
                                      cudaMemcpyHostToDevice, stream_),
                      "weight copy"));
  } else {
    // Through an fp32 staging buffer, a chunk at a time, converted on the device.
    constexpr int64_t kChunk = int64_t{1} << 22;
    if (absl::Status st = convert_.Reserve(static_cast<size_t>(std::min(n, kChunk)) * 4, stream_);
        !st.ok()) {
      return st;
    }
    for (int64_t at = 0; at < n; at += kChunk) {
      const int64_t len = std::min(kChunk, n - at);
      Record(CudaStatus(cudaMemcpyAsync(convert_.data(), host + at, static_cast<size_t>(len) * 4,
                                        cudaMemcpyHostToDevice, stream_),
                        "weight copy"));
      cuda::GatherRowsParams p;
      p.in = convert_.data();
      p.in_dtype = DType::kF32;
      p.out =
          static_cast<char*>(t->view.data) + at * static_cast<int64_t>(DTypeSize(options_.dtype));
      p.out_dtype = options_.dtype;
      p.rows = 1;
      p.cols = len;
      RecordLaunch(cuda::LaunchGatherRows(p, stream_), "weight conversion");
    }
  }
  if (absl::Status st = SyncAndTakeStatus(); !st.ok()) return st;
  return t;
}

absl::Status CudaBackend::ReadF32(const Tensor& x, float* host) {
  const size_t row_bytes = static_cast<size_t>(x.cols) * 4;
  if (x.rows > 0 && x.cols > 0 && status_.ok()) {
    const void* src = x.data;
    size_t pitch = static_cast<size_t>(x.stride) * 4;
    if (x.dtype != DType::kF32) {
      // Converted to contiguous fp32 on the device first.
      if (absl::Status st = convert_.Reserve(row_bytes * x.rows, stream_); !st.ok()) {
        Record(st);
        return SyncAndTakeStatus();
      }
      GatherRowsParams p;
      p.in = x.data;
      p.in_dtype = x.dtype;
      p.in_stride = x.stride;
      p.out = convert_.data();
      p.out_dtype = DType::kF32;
      p.out_stride = x.cols;
      p.rows = x.rows;
      p.cols = x.cols;
      RecordLaunch(LaunchGatherRows(p, stream_), "read conversion");
      src = convert_.data();
      pitch = row_bytes;
    }
    // Through pinned memory (host_reader.h): no pageable copy per step.
    if (status_.ok()) Record(reader_.Read(host, src, pitch, row_bytes, x.rows, stream_));
  }
  return SyncAndTakeStatus();
}

absl::Status CudaBackend::Synchronize() { return SyncAndTakeStatus(); }

absl::Status CudaBackend::PrepareBatch(const BatchInput& batch) {
  const size_t n = static_cast<size_t>(batch.num_tokens());
  const size_t seqs = static_cast<size_t>(batch.num_seqs());
  if (batch.positions.size() != n || batch.slot_mapping.size() != n ||
      batch.query_start_loc.size() != seqs + 1 || batch.max_blocks_per_seq < 0 ||
      batch.block_tables.size() != seqs * static_cast<size_t>(batch.max_blocks_per_seq) ||
      batch.query_start_loc.front() != 0 ||
      batch.query_start_loc.back() != static_cast<int32_t>(n)) {
    return absl::InvalidArgumentError("cuda: inconsistent batch metadata");
  }
  for (size_t s = 0; s < seqs; ++s) {
    if (batch.query_start_loc[s + 1] < batch.query_start_loc[s]) {
      return absl::InvalidArgumentError("cuda: query_start_loc decreases");
    }
  }
  cudaSetDevice(device_);
  batch_ = batch;
  has_batch_ = false;
  plan_current_ = false;
  // Block-table rows padded to a power of two: the kernels read them at that stride.
  const int32_t stride = RoundUpPow2(batch.max_blocks_per_seq);
  const std::vector<int32_t>* tables = &batch.block_tables;
  if (stride != batch.max_blocks_per_seq) {
    padded_tables_.assign(seqs * static_cast<size_t>(stride), -1);
    for (size_t s = 0; s < seqs; ++s) {
      std::copy_n(batch.block_tables.begin() + s * batch.max_blocks_per_seq,
                  batch.max_blocks_per_seq, padded_tables_.begin() + s * stride);
    }
    tables = &padded_tables_;
  }
  Packer size_only(nullptr);
  for (const auto* v :
       {&batch.token_ids, &batch.positions, &batch.slot_mapping, tables, &batch.logits_indices}) {
    size_only.Add(v->data(), v->size());
  }
  if (absl::Status st = batch_upload_.Reserve(size_only.size(), stream_); !st.ok()) return st;
  Packer pack(batch_upload_.host());
  const char* base = batch_upload_.device();
  auto at = [&](const std::vector<int32_t>& v) {
    return reinterpret_cast<const int32_t*>(base + pack.Add(v.data(), v.size()));
  };
  dev_batch_.token_ids = at(batch.token_ids);
  dev_batch_.positions = at(batch.positions);
  dev_batch_.slot_mapping = at(batch.slot_mapping);
  dev_batch_.block_tables = at(*tables);
  dev_batch_.block_stride = stride;
  dev_batch_.logits_indices = at(batch.logits_indices);
  if (absl::Status st = batch_upload_.Upload(pack.size(), stream_); !st.ok()) return st;
  has_batch_ = true;
  return absl::OkStatus();
}

absl::Status CudaBackend::EnsurePlan(const PlanKey& key) {
  if (plan_current_ && plan_key_ == key) return absl::OkStatus();
  if (capturing_) {
    // Uploading inside a capture would wait on the stream: RunRecordable gives up instead.
    return absl::FailedPreconditionError("cuda graph capture: the attention plan changed");
  }
  AttentionPlanOptions o;
  o.path = key.path;
  o.num_heads = key.num_heads;
  o.num_kv_heads = key.num_kv_heads;
  o.num_blocks = key.num_blocks;
  o.block_size = key.block_size;
  o.num_sms = num_sms_;
  o.split_partition = options_.split_kv_partition;
  absl::StatusOr<AttentionPlan> plan = BuildAttentionPlan(batch_, o);
  if (!plan.ok()) return plan.status();
  plan_ = std::move(*plan);
  // A decode step that may become a graph: sizes by bucket, so that it replays across steps.
  if (options_.graphs && batch_.num_tokens() == batch_.num_seqs()) {
    PadPlanForGraphs(batch_.num_seqs(), &plan_);
  }
  Packer size_only(nullptr);
  size_only.Add(plan_.items.data(), plan_.items.size());
  size_only.Add(plan_.tiles.data(), plan_.tiles.size());
  size_only.Add(plan_.splits.data(), plan_.splits.size());
  if (absl::Status st = plan_upload_.Reserve(size_only.size(), stream_); !st.ok()) return st;
  Packer pack(plan_upload_.host());
  const char* base = plan_upload_.device();
  dev_items_ = reinterpret_cast<const AttentionItem*>(
      base + pack.Add(plan_.items.data(), plan_.items.size()));
  dev_tiles_ =
      reinterpret_cast<const PrefillTile*>(base + pack.Add(plan_.tiles.data(), plan_.tiles.size()));
  dev_splits_ = reinterpret_cast<const SplitToken*>(
      base + pack.Add(plan_.splits.data(), plan_.splits.size()));
  if (absl::Status st = plan_upload_.Upload(pack.size(), stream_); !st.ok()) return st;
  const size_t partial_floats =
      static_cast<size_t>(plan_.num_partials) * key.num_heads * (key.head_dim + 2);
  if (absl::Status st = partials_.Reserve(partial_floats * 4, stream_); !st.ok()) return st;
  plan_key_ = key;
  have_plan_key_ = true;
  plan_current_ = true;
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace pagoda::kernels
