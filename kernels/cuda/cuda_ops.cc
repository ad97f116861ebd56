// The operators of the CUDA backend: shape checks on the host, then one kernel launch (or
// cuBLAS call) queued on the backend's stream. A failed check or launch is recorded and
// reported by the next Synchronize / ReadF32 / CopyToHost.
#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/add.cuh"
#include "kernels/cuda/argmax.cuh"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/gather_rows.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/silu_mul.cuh"
#include "kernels/cuda/softmax.cuh"
#include "kernels/cuda/write_kv.cuh"

namespace pagoda::kernels::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

std::string Describe(const Tensor& t) {
  return absl::StrCat("[", t.rows, " x ", t.cols, " ", std::string(DTypeName(t.dtype)), "]");
}

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// An fp8 cache's scale is finite and > 0 (0 would store inf, a NaN scale NaN).
bool FiniteScale(const KvCacheShape& cs) {
  return cs.dtype != DType::kF8E4M3 || (std::isfinite(cs.fp8_scale) && cs.fp8_scale > 0);
}

cudaDataType_t CublasType(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

int32_t Log2(int32_t x) {
  int32_t r = 0;
  while ((1 << r) < x) ++r;
  return r;
}

}  // namespace

// Records InvalidArgument "cuda: <op>: <what>" and returns from the op unless `ok`.
#define PAGODA_CHECK_OP(ok, op, what)                                           \
  if (!(ok)) {                                                                  \
    Record(absl::InvalidArgumentError(absl::StrCat("cuda: ", op, ": ", what))); \
    return;                                                                     \
  }

void CudaBackend::Embed(const Tensor& table, const Tensor& out) {
  if (!HaveBatch("Embed")) return;
  PAGODA_CHECK_OP(out.rows == batch_.num_tokens() && out.cols == table.cols, "Embed",
                  absl::StrCat("table ", Describe(table), ", out ", Describe(out)));
  for (int32_t id : batch_.token_ids) {
    PAGODA_CHECK_OP(id >= 0 && id < table.rows, "Embed", absl::StrCat("token id ", id));
  }
  GatherRowsParams p;
  p.in = table.data;
  p.in_dtype = table.dtype;
  p.in_stride = table.stride;
  p.out = out.data;
  p.out_dtype = out.dtype;
  p.out_stride = out.stride;
  p.indices = dev_batch_.token_ids;
  p.rows = out.rows;
  p.cols = out.cols;
  RecordLaunch(LaunchGatherRows(p, stream_), "Embed");
}

void CudaBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  PAGODA_CHECK_OP(
      out.rows == x.rows && out.cols == x.cols && weight.cols == x.cols && x.dtype == out.dtype &&
          weight.dtype == x.dtype,
      "RmsNorm", absl::StrCat(Describe(x), ", weight ", Describe(weight), ", out ", Describe(out)));
  RmsNormParams p;
  p.x = x.data;
  p.weight = weight.data;
  p.out = out.data;
  p.dtype = x.dtype;
  p.rows = x.rows;
  p.cols = x.cols;
  p.x_stride = x.stride;
  p.out_stride = out.stride;
  p.eps = eps;
  RecordLaunch(LaunchRmsNorm(p, stream_), "RmsNorm");
}

void CudaBackend::MatMul(const Tensor& x, const Tensor& w, const Tensor& out) {
  PAGODA_CHECK_OP(x.cols == w.cols && out.rows == x.rows && out.cols == w.rows &&
                      x.dtype == w.dtype && (out.dtype == x.dtype || out.dtype == DType::kF32),
                  "MatMul", absl::StrCat(Describe(x), " x ", Describe(w), "^T -> ", Describe(out)));
  if (x.rows == 0 || w.rows == 0) return;
  if (options_.gemv) {
    GemvParams g;
    g.x = x.data;
    g.w = w.data;
    g.out = out.data;
    g.dtype = x.dtype;
    g.out_dtype = out.dtype;
    g.n = x.rows;
    g.m = w.rows;
    g.k = x.cols;
    g.x_stride = x.stride;
    g.w_stride = w.stride;
    g.out_stride = out.stride;
    if (GemvApplies(g)) {
      RecordLaunch(LaunchGemv(g, stream_), "MatMul (gemv)");
      return;
    }
  }
  // Row-major out[n, m] = x[n, k] w[m, k]^T is column-major out^T = w^T' x^T' where the
  // column-major views of w and x are [k, m] and [k, n]: C(m x n) = op_T(A) * B.
  const float alpha = 1.f;
  const float beta = 0.f;
  const cublasStatus_t s = cublasGemmEx(
      cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), static_cast<int>(x.rows),
      static_cast<int>(x.cols), &alpha, w.data, CublasType(w.dtype), static_cast<int>(w.stride),
      x.data, CublasType(x.dtype), static_cast<int>(x.stride), &beta, out.data,
      CublasType(out.dtype), static_cast<int>(out.stride), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) {
    Record(absl::InternalError(absl::StrCat("cuda: MatMul: ", cublasGetStatusString(s))));
  }
}

void CudaBackend::Rope(const Tensor& q, const Tensor& k, const RopeParams& params) {
  if (!HaveBatch("Rope")) return;
  const Tensor& ff = params.freq_factors;
  PAGODA_CHECK_OP(
      q.rows == k.rows && q.rows <= batch_.num_tokens() && q.dtype == k.dtype &&
          q.cols == int64_t{params.num_heads} * params.head_dim &&
          k.cols == int64_t{params.num_kv_heads} * params.head_dim && params.rope_dim % 2 == 0 &&
          params.rope_dim >= 0 && params.rope_dim <= params.head_dim,
      "Rope", absl::StrCat("q ", Describe(q), ", k ", Describe(k), ", rope_dim ", params.rope_dim));
  PAGODA_CHECK_OP(ff.data == nullptr ||
                      (ff.dtype == DType::kF32 && ff.rows == 1 && ff.cols >= params.rope_dim / 2),
                  "Rope", absl::StrCat("freq_factors ", Describe(ff)));
  RopeLaunchParams p;
  p.q = q.data;
  p.k = k.data;
  p.positions = dev_batch_.positions;
  p.freq_factors = static_cast<const float*>(ff.data);
  p.dtype = q.dtype;
  p.rows = q.rows;
  p.q_stride = q.stride;
  p.k_stride = k.stride;
  p.num_heads = params.num_heads;
  p.num_kv_heads = params.num_kv_heads;
  p.head_dim = params.head_dim;
  p.rope_dim = params.rope_dim;
  p.neox = params.neox;
  // Same expressions as the CPU backend (kernels/cpu/cpu_rope.cc), so they round identically.
  p.theta_scale = std::pow(params.freq_base, -2.f / static_cast<float>(params.rope_dim));
  p.freq_scale = params.freq_scale;
  p.ext_factor = params.ext_factor;
  p.mscale = params.attn_factor;
  if (params.ext_factor != 0.f) {
    p.mscale *= 1.f + 0.1f * std::log(1.f / params.freq_scale);
    const std::array<float, 2> corr = RopeYarnCorrDims(params);
    p.corr_low = corr[0];
    p.corr_high = corr[1];
  }
  RecordLaunch(LaunchRope(p, stream_), "Rope");
}

void CudaBackend::SiluMul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  PAGODA_CHECK_OP(gate.rows == up.rows && gate.cols == up.cols && out.rows == gate.rows &&
                      out.cols == gate.cols && gate.dtype == up.dtype && out.dtype == gate.dtype,
                  "SiluMul",
                  absl::StrCat(Describe(gate), ", ", Describe(up), " -> ", Describe(out)));
  SiluMulParams p;
  p.gate = gate.data;
  p.up = up.data;
  p.out = out.data;
  p.dtype = gate.dtype;
  p.rows = gate.rows;
  p.cols = gate.cols;
  p.gate_stride = gate.stride;
  p.up_stride = up.stride;
  p.out_stride = out.stride;
  RecordLaunch(LaunchSiluMul(p, stream_), "SiluMul");
}

void CudaBackend::Add(const Tensor& x, const Tensor& y) {
  PAGODA_CHECK_OP(x.rows == y.rows && x.cols == y.cols && x.dtype == y.dtype, "Add",
                  absl::StrCat(Describe(x), " += ", Describe(y)));
  AddParams p;
  p.x = x.data;
  p.y = y.data;
  p.dtype = x.dtype;
  p.rows = x.rows;
  p.cols = x.cols;
  p.x_stride = x.stride;
  p.y_stride = y.stride;
  RecordLaunch(LaunchAdd(p, stream_), "Add");
}

void CudaBackend::AddBias(const Tensor& x, const Tensor& bias) {
  PAGODA_CHECK_OP(bias.rows == 1 && bias.cols == x.cols && bias.dtype == DType::kF32, "AddBias",
                  absl::StrCat(Describe(x), " += ", Describe(bias)));
  AddBiasParams p;
  p.x = x.data;
  p.bias = static_cast<const float*>(bias.data);
  p.dtype = x.dtype;
  p.rows = x.rows;
  p.cols = x.cols;
  p.x_stride = x.stride;
  RecordLaunch(LaunchAddBias(p, stream_), "AddBias");
}

void CudaBackend::WriteKv(const Tensor& k, const Tensor& v, const PagedKvCache& cache,
                          int32_t layer) {
  if (!HaveBatch("WriteKv")) return;
  const KvCacheShape& cs = cache.shape;
  PAGODA_CHECK_OP(
      k.rows == batch_.num_tokens() && v.rows == k.rows && k.cols == cs.token_elems() &&
          v.cols == k.cols && k.dtype == options_.dtype && v.dtype == k.dtype &&
          SupportsKvDtype(cs.dtype) && FiniteScale(cs) && layer >= 0 && layer < cs.num_layers,
      "WriteKv",
      absl::StrCat("k ", Describe(k), ", v ", Describe(v), ", cache heads x dim ", cs.num_kv_heads,
                   " x ", cs.head_dim, " ", std::string(DTypeName(cs.dtype)), ", fp8 scale ",
                   cs.fp8_scale, ", layer ", layer));
  const int64_t slots = int64_t{cs.num_blocks} * cs.block_size;
  for (int32_t slot : batch_.slot_mapping) {
    PAGODA_CHECK_OP(slot < slots, "WriteKv", absl::StrCat("slot ", slot, " outside the cache"));
  }
  WriteKvParams p;
  p.k = k.data;
  p.v = v.data;
  p.k_plane = cache.Plane(layer, 0);
  p.v_plane = cache.Plane(layer, 1);
  p.slot_mapping = dev_batch_.slot_mapping;
  p.dtype = k.dtype;
  p.kv_dtype = cs.dtype;
  p.inv_scale = cs.dtype == DType::kF8E4M3 ? 1.f / cs.fp8_scale : 1.f;
  p.num_tokens = k.rows;
  p.width = k.cols;
  p.k_stride = k.stride;
  p.v_stride = v.stride;
  RecordLaunch(LaunchWriteKv(p, stream_), "WriteKv");
}

void CudaBackend::Attention(const Tensor& q, const PagedKvCache& cache, int32_t layer,
                            const AttentionParams& params, const Tensor& out) {
  if (!HaveBatch("Attention")) return;
  const KvCacheShape& cs = cache.shape;
  const int64_t width = int64_t{params.num_heads} * params.head_dim;
  PAGODA_CHECK_OP(q.rows == batch_.num_tokens() && out.rows == q.rows && q.cols == width &&
                      out.cols == width && cs.head_dim == params.head_dim &&
                      cs.num_kv_heads == params.num_kv_heads && q.dtype == options_.dtype &&
                      out.dtype == q.dtype && SupportsKvDtype(cs.dtype) && FiniteScale(cs) &&
                      layer >= 0 && layer < cs.num_layers,
                  "Attention",
                  absl::StrCat("q ", Describe(q), ", out ", Describe(out), ", cache heads x dim ",
                               cs.num_kv_heads, " x ", cs.head_dim, " ",
                               std::string(DTypeName(cs.dtype)), ", fp8 scale ", cs.fp8_scale));
  if (q.rows == 0) return;
  AttentionShape shape;
  shape.dtype = q.dtype;
  shape.kv_dtype = cs.dtype;
  shape.head_dim = params.head_dim;
  shape.block_size = cs.block_size;
  shape.num_heads = params.num_heads;
  shape.num_kv_heads = params.num_kv_heads;
  // 16-bit pairs are read from q and written to out; cache rows are copied 16 bytes at a time.
  shape.aligned = Aligned(q.data, 4) && q.stride % 2 == 0 && Aligned(out.data, 4) &&
                  out.stride % 2 == 0 && Aligned(cache.data, 16);
  // The tensor-core kernels round value * fp8_scale to the activation type: beyond f16's
  // 65504 (448 * scale, scale > 146) the CUDA-core kernel, which stays in fp32, takes it.
  const bool f16_overflow =
      q.dtype == DType::kF16 && cs.dtype == DType::kF8E4M3 && 448.f * cs.fp8_scale > 65504.f;
  shape.force_generic = options_.generic_attention || f16_overflow;
  absl::StatusOr<AttentionPath> path = ChooseAttentionPath(shape);
  if (!path.ok()) return Record(path.status());
  const PlanKey key{*path,         params.num_heads, params.num_kv_heads,
                    cs.num_blocks, cs.block_size,    params.head_dim};
  if (absl::Status st = EnsurePlan(key); !st.ok()) return Record(st);

  PagedAttentionParams p;
  p.q = q.data;
  p.out = out.data;
  p.k_cache = cache.Plane(layer, 0);
  p.v_cache = cache.Plane(layer, 1);
  p.block_tables = dev_batch_.block_tables;
  p.positions = dev_batch_.positions;
  p.items = dev_items_;
  p.tiles = dev_tiles_;
  p.splits = dev_splits_;
  p.partial_out = static_cast<float*>(partials_.data());
  p.partial_ml = p.partial_out + int64_t{plan_.num_partials} * params.num_heads * params.head_dim;
  p.dtype = q.dtype;
  p.kv_dtype = cs.dtype;
  p.kv_scale = cs.dtype == DType::kF8E4M3 ? cs.fp8_scale : 1.f;
  p.path = *path;
  p.q_stride = q.stride;
  p.out_stride = out.stride;
  p.num_items = static_cast<int32_t>(plan_.items.size());
  p.num_tiles = static_cast<int32_t>(plan_.tiles.size());
  p.num_splits = static_cast<int32_t>(plan_.splits.size());
  p.num_heads = params.num_heads;
  p.num_kv_heads = params.num_kv_heads;
  p.head_dim = params.head_dim;
  p.log2_block_size = Log2(cs.block_size);
  p.max_blocks_per_seq = dev_batch_.block_stride;
  p.scale_log2 = params.scale * kLog2e;
  const cudaError_t err = LaunchPagedAttention(p, stream_);
  RecordLaunch(err, "Attention");
  if (err != cudaSuccess) return;
  ++trace_.calls;
  trace_.tensor_core = *path == AttentionPath::kTensorCore;
  SetPlanTrace();
}

void CudaBackend::SetPlanTrace() {
  // The plan's own padding (PadPlanForGraphs) is not counted.
  trace_.decode_items =
      (trace_.tensor_core ? static_cast<int32_t>(plan_.items.size()) : plan_.num_decode_items) -
      plan_.padding_items;
  trace_.prefill_tiles = static_cast<int32_t>(plan_.tiles.size());
  trace_.split_tokens = static_cast<int32_t>(plan_.splits.size()) - plan_.padding_splits;
}

void CudaBackend::GatherLogitRows(const Tensor& x, const Tensor& out) {
  if (!HaveBatch("GatherLogitRows")) return;
  PAGODA_CHECK_OP(out.rows == batch_.num_logits() && out.cols == x.cols, "GatherLogitRows",
                  absl::StrCat(Describe(x), " -> ", Describe(out)));
  for (int32_t row : batch_.logits_indices) {
    PAGODA_CHECK_OP(row >= 0 && row < x.rows, "GatherLogitRows", absl::StrCat("row ", row));
  }
  GatherRowsParams p;
  p.in = x.data;
  p.in_dtype = x.dtype;
  p.in_stride = x.stride;
  p.out = out.data;
  p.out_dtype = out.dtype;
  p.out_stride = out.stride;
  p.indices = dev_batch_.logits_indices;
  p.rows = out.rows;
  p.cols = out.cols;
  RecordLaunch(LaunchGatherRows(p, stream_), "GatherLogitRows");
}

absl::Status CudaBackend::ArgmaxRows(const Tensor& logits, int32_t* host_ids) {
  if (logits.rows == 0) return SyncAndTakeStatus();
  if (absl::Status st = ids_.Reserve(static_cast<size_t>(logits.rows) * 4, stream_); !st.ok()) {
    return st;
  }
  ArgmaxParams p;
  p.x = logits.data;
  p.out = static_cast<int32_t*>(ids_.data());
  p.dtype = logits.dtype;
  p.rows = logits.rows;
  p.cols = logits.cols;
  p.stride = logits.stride;
  RecordLaunch(LaunchArgmax(p, stream_), "Argmax");
  Record(CudaStatus(cudaMemcpyAsync(host_ids, ids_.data(), static_cast<size_t>(logits.rows) * 4,
                                    cudaMemcpyDeviceToHost, stream_),
                    "argmax copy"));
  return SyncAndTakeStatus();
}

absl::Status CudaBackend::SoftmaxRows(const Tensor& logits, float temperature,
                                      const Tensor& probs) {
  if (probs.rows != logits.rows || probs.cols != logits.cols || probs.dtype != DType::kF32 ||
      !(temperature > 0.f)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda: Softmax: ", Describe(logits), " -> ",
                                                   Describe(probs), ", temperature ", temperature));
  }
  SoftmaxParams p;
  p.x = logits.data;
  p.out = static_cast<float*>(probs.data);
  p.dtype = logits.dtype;
  p.rows = logits.rows;
  p.cols = logits.cols;
  p.x_stride = logits.stride;
  p.out_stride = probs.stride;
  p.temperature = temperature;
  return CudaStatus(LaunchSoftmax(p, stream_), "Softmax");
}

#undef PAGODA_CHECK_OP

}  // namespace pagoda::kernels::cuda
