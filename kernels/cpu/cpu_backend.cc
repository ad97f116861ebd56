#include "kernels/cpu/cpu_backend.h"

#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "kernels/cpu/cpu_attention.h"
#include "kernels/cpu/cpu_elementwise.h"
#include "kernels/cpu/cpu_f32_matmul.h"
#include "kernels/cpu/cpu_quant_matmul.h"
#include "kernels/cpu/cpu_rope.h"
#include "kernels/cpu_isa.h"
#include "kernels/quant/dequantize.h"
#include "kernels/quant/interleaved.h"

namespace pagoda::kernels {
namespace {

// Elementwise work below this many elements runs on the calling thread.
constexpr int64_t kMinParallelElems = 1 << 16;
// Matrix products below this many multiply-adds run on the calling thread; above it, the
// output columns are split across the pool (OpenBLAS itself runs single-threaded, so one
// set of threads owns the cores).
constexpr int64_t kMinParallelMacs = 1 << 18;
// Column chunks are multiples of this, so each thread's slice of W stays aligned.
constexpr int64_t kColumnGrain = 64;
// Every f32 product, decode or prefill, uses the SIMD dot-product kernel on the weights as
// stored (cpu_f32_matmul.h): each output element is one dot product whose arithmetic does not
// depend on the other rows of the batch, so a token's result never depends on what runs beside
// it (batch invariance, docs/ARCHITECTURE.md). OpenBLAS, faster for large prefills on some
// machines, rounds differently at different sizes; it is used only where no SIMD kernel exists
// or when asked for (--cpu-matmul blas), and then batch invariance does not hold.

class CpuBackend final : public Backend {
 public:
  // `blas_only` sends every f32 product to OpenBLAS (BackendOptions::cpu_blas_only).
  CpuBackend(int32_t num_threads, bool blas_only)
      : pool_(num_threads),
        max_dot_rows_(!cpu::HasF32DotKernel() || blas_only ? 0
                                                           : std::numeric_limits<int64_t>::max()) {
    openblas_set_num_threads(1);
  }

  std::string name() const override { return "cpu"; }
  DType activation_dtype() const override { return DType::kF32; }
  // f16 K/V, as llama.cpp keeps them: half the bytes of f32 (twice the sequences per GiB, and
  // decode attention, bound by reading the cache, ~40% faster), batch-invariant like every
  // type. `--kv-cache-dtype f32` keeps the exact float32 cache the llama.cpp references
  // were made with (docs/ARCHITECTURE.md).
  DType kv_dtype() const override { return DType::kF16; }
  bool SupportsKvDtype(DType dtype) const override { return cpu::SupportsKvDtype(dtype); }

  // Buffers of at least kHugePage are aligned to it and their whole huge pages advised
  // MADV_HUGEPAGE: decode streams every weight once per step, and 2 MiB pages take the TLB
  // misses of 4 KiB pages (one per 4 KiB read) out of that stream. The tail stays in small
  // pages, so no memory is wasted.
  absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) override {
#ifdef MADV_POPULATE_WRITE
    constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
    constexpr int kPopulateWrite = 23;  // Linux 5.14's value; older kernels refuse it
#endif
    constexpr size_t kHugePage = size_t{2} << 20;
    void* p = nullptr;
    const size_t alignment = bytes >= kHugePage ? kHugePage : 64;
    if (posix_memalign(&p, alignment, std::max<size_t>(bytes, 64)) != 0) {
      return absl::ResourceExhaustedError(absl::StrCat("cpu: cannot allocate ", bytes, " bytes"));
    }
    if (bytes >= kHugePage) {
      madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
      // Fault every page in now (without writing it), as llama.cpp does by clearing its KV
      // cache: a first write to a fresh page costs a page fault, and the KV cache's blocks
      // would otherwise pay them inside requests, one block's first use at a time
      // (measured: 6% of a 2,048-token prefill on a VM). Kernels before 5.14 lack it.
      madvise(p, bytes, kPopulateWrite);
    }
    return DeviceBuffer(p, bytes, [](void* q) { std::free(q); });
  }

  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Zero(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return absl::OkStatus();
  }

  absl::StatusOr<OwnedTensor> CreateWeight(const float* host, int64_t rows, int64_t cols) override {
    auto t = AllocateTensor(DType::kF32, rows, cols);
    if (!t.ok()) return t.status();
    std::memcpy(t->view.data, host, static_cast<size_t>(rows * cols) * sizeof(float));
    return t;
  }

  // Keeps the bytes as the file stores them (F32, F16, BF16 or a block format).
  absl::StatusOr<OwnedTensor> CreateWeightRaw(DType type, const void* data, int64_t rows,
                                              int64_t cols) override {
    if (absl::Status s = ValidateWeightShape(type, rows, cols); !s.ok()) return s;
    auto t = AllocateTensor(type, rows, cols);
    if (!t.ok()) return t.status();
    std::memcpy(t->view.data, data, DTypeRowBytes(type, rows * cols));
    return t;
  }

  // Q4_K and Q8_0 matrices of whole groups of sixteen rows are interleaved
  // (interleaved.h) where the CPU runs those layouts' kernels: every product of the weight then
  // goes through them, whatever the number of rows, so the results stay batch-invariant
  // (docs/ARCHITECTURE.md).
  absl::Status PrepareMatMulWeight(OwnedTensor* weight) override {
    const Tensor& w = weight->view;
    struct Layout {
      DType file, interleaved;
      void (*interleave)(const void*, int64_t, int64_t, void*);
    };
    static constexpr Layout kLayouts[] = {
        {DType::kQ4_K, DType::kQ4_Kx16, quant::InterleaveQ4_K},
        {DType::kQ8_0, DType::kQ8_0x16, quant::InterleaveQ8_0},
        {DType::kQ6_K, DType::kQ6_Kx16, quant::InterleaveQ6_K},
    };
    const Layout* layout = nullptr;
    for (const Layout& l : kLayouts) {
      if (l.file == w.dtype) layout = &l;
    }
    if (layout == nullptr || !w.contiguous() || w.rows % quant::kInterleavedRows != 0 ||
        !CpuIsaActive(CpuIsa::kAvx512Vnni)) {
      return absl::OkStatus();
    }
    auto t = AllocateTensor(layout->interleaved, w.rows, w.cols);
    if (!t.ok()) return t.status();
    layout->interleave(w.data, w.rows, w.cols, t->view.data);
    *weight = *std::move(t);
    return absl::OkStatus();
  }

  absl::Status ReadF32(const Tensor& x, float* host) override {
    if (x.dtype == DType::kQ8_1 || x.dtype == DType::kQ8_K) {
      return absl::InvalidArgumentError("cpu: cannot read an activation-format tensor");
    }
    void (*interleaved)(const void*, int64_t, int64_t, float*) =
        x.dtype == DType::kQ4_Kx16   ? quant::DequantizeQ4_Kx16Row
        : x.dtype == DType::kQ8_0x16 ? quant::DequantizeQ8_0x16Row
        : x.dtype == DType::kQ6_Kx16 ? quant::DequantizeQ6_Kx16Row
                                     : nullptr;
    if (interleaved != nullptr) {
      for (int64_t r = 0; r < x.rows; ++r) interleaved(x.data, r, x.cols, host + r * x.cols);
      return absl::OkStatus();
    }
    for (int64_t r = 0; r < x.rows; ++r) {
      quant::DequantizeRow(x.dtype, x.row_bytes(r), host + r * x.cols, x.cols);
    }
    return absl::OkStatus();
  }

  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status PrepareBatch(const BatchInput& batch) override {
    batch_ = batch;
    return absl::OkStatus();
  }

  // A row of a 16-bit or quantized table is dequantized (ggml's get_rows).
  void Embed(const Tensor& table, const Tensor& out) override {
    for (int32_t i = 0; i < batch_.num_tokens(); ++i) {
      quant::DequantizeRow(table.dtype, table.row_bytes(batch_.token_ids[i]), out.row<float>(i),
                           out.cols);
    }
  }

  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    const float* w = weight.row<float>(0);
    ForRows(x.rows, x.cols, [&](int64_t r) {
      const float* in = x.row<float>(r);
      float* o = out.row<float>(r);
      double sum = 0;
      for (int64_t c = 0; c < x.cols; ++c) sum += double{in[c]} * in[c];
      const float scale = 1.f / std::sqrt(static_cast<float>(sum / x.cols) + eps);
      for (int64_t c = 0; c < x.cols; ++c) o[c] = in[c] * scale * w[c];
    });
  }

  void MatMul(const Tensor& x, const Tensor& w, const Tensor& out) override {
    if (w.dtype != DType::kF32) {
      cpu::QuantMatMul(x, w, out, &quant_scratch_, &pool_);
      return;
    }
    // out[n, m] = x[n, k] * w[m, k]^T; thread t computes the columns [m0, m1) of out.
    const int64_t n = x.rows, m = w.rows, k = x.cols;
    const bool dot = n <= max_dot_rows_;
    auto columns = [&](int64_t m0, int64_t m1) {
      if (dot) {
        cpu::F32MatMulColumns(x, w, out, m0, m1);
        return;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                  static_cast<int>(m1 - m0), static_cast<int>(k), 1.f,
                  static_cast<const float*>(x.data), static_cast<int>(x.stride),
                  w.row<const float>(m0), static_cast<int>(w.stride), 0.f, out.row<float>(0) + m0,
                  static_cast<int>(out.stride));
    };
    if (n * m * k < kMinParallelMacs || pool_.num_threads() == 1) {
      columns(0, m);
      return;
    }
    const int64_t chunks = (m + kColumnGrain - 1) / kColumnGrain;
    pool_.ParallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
      columns(begin * kColumnGrain, std::min(m, end * kColumnGrain));
    });
  }

  void Rope(const Tensor& q, const Tensor& k, const RopeParams& p) override {
    cpu::Rope(batch_, q, k, p, &pool_);
  }

  void SiluMul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    ForRows(gate.rows, gate.cols, [&](int64_t r) {
      cpu::SiluMulRow(gate.row<float>(r), up.row<float>(r), out.row<float>(r), gate.cols);
    });
  }

  void Add(const Tensor& x, const Tensor& y) override {
    ForRows(x.rows, x.cols, [&](int64_t r) {
      float* a = x.row<float>(r);
      const float* b = y.row<float>(r);
      for (int64_t c = 0; c < x.cols; ++c) a[c] += b[c];
    });
  }

  void AddBias(const Tensor& x, const Tensor& bias) override {
    const float* b = bias.row<const float>(0);
    ForRows(x.rows, x.cols, [&](int64_t r) {
      float* a = x.row<float>(r);
      for (int64_t c = 0; c < x.cols; ++c) a[c] += b[c];
    });
  }

  void WriteKv(const Tensor& k, const Tensor& v, const PagedKvCache& cache,
               int32_t layer) override {
    cpu::WriteKv(batch_, k, v, cache, layer, &pool_);
  }

  void Attention(const Tensor& q, const PagedKvCache& cache, int32_t layer,
                 const AttentionParams& params, const Tensor& out) override {
    cpu::PagedAttention(batch_, q, cache, layer, params, out, &pool_);
  }

  void GatherLogitRows(const Tensor& x, const Tensor& out) override {
    for (int32_t j = 0; j < batch_.num_logits(); ++j) {
      std::memcpy(out.row<float>(j), x.row<float>(batch_.logits_indices[j]),
                  static_cast<size_t>(x.cols) * sizeof(float));
    }
  }

 private:
  // Calls fn(r) for every row, in parallel when rows * cols is large enough.
  template <typename Fn>
  void ForRows(int64_t rows, int64_t cols, Fn&& fn) {
    const int64_t grain = std::max<int64_t>(1, kMinParallelElems / std::max<int64_t>(cols, 1));
    pool_.ParallelFor(rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) fn(r);
    });
  }

  ThreadPool pool_;
  int64_t
      max_dot_rows_;  // f32 products up to this many rows use cpu::F32MatMulColumns (all or none)
  BatchInput batch_;
  std::vector<uint8_t> quant_scratch_;  // activations quantized for QuantMatMul
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const BackendOptions& options) {
  if (options.cpu_isa.has_value()) RETURN_IF_ERROR(SetCpuIsaCap(*options.cpu_isa));
  return std::make_unique<CpuBackend>(options.num_threads, options.cpu_blas_only);
}

}  // namespace pagoda::kernels
