// The CUDA backend's element-wise, normalization, GEMM, RoPE, gather and KV-write ops
// against the CPU backend (the reference) on random inputs, for f32, bf16 and f16, with
// strided column views and NaN-poisoned outputs. Attention has its own file
// (cuda_attention_test.cc). Tests that need a device skip without one.
#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/gemv.cuh"
#include "tests/cuda_test_util.h"

namespace pagoda::kernels {
namespace {

using testing::BackendPair;
using testing::ExpectAllClose;
using testing::MakeOutput;
using testing::MakeTwin;
using testing::RandomValues;
using testing::Read;
using testing::Tolerance;
using testing::TwinTensor;

// A batch of one sequence whose tokens sit at `positions` (only what non-attention ops read).
BatchInput FlatBatch(const std::vector<int32_t>& positions, std::vector<int32_t> token_ids = {}) {
  BatchInput b;
  const int32_t n = static_cast<int32_t>(positions.size());
  b.positions = positions;
  b.token_ids = token_ids.empty() ? std::vector<int32_t>(n, 0) : token_ids;
  b.slot_mapping.assign(n, -1);
  b.query_start_loc = {0, n};
  b.seq_lens = {n};
  b.max_blocks_per_seq = 0;
  return b;
}

class CudaOpsTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    PAGODA_SKIP_WITHOUT_CUDA();
    b_ = testing::MakeBackendPair({.dtype = GetParam()});
    ASSERT_NE(b_.cuda, nullptr);
  }
  void Prepare(const BatchInput& batch) {
    ASSERT_TRUE(b_.cpu->PrepareBatch(batch).ok());
    ASSERT_TRUE(b_.cuda->PrepareBatch(batch).ok());
  }
  // Reads `out` from both backends and compares every element.
  void Compare(const TwinTensor& out, const std::string& what, double tol_scale = 1.0) {
    ASSERT_TRUE(b_.cuda->Synchronize().ok());
    ExpectAllClose(Read(*b_.cuda, out.cuda), Read(*b_.cpu, out.cpu),
                   Tolerance(GetParam()) * tol_scale,
                   absl::StrCat(what, " (", std::string(DTypeName(GetParam())), ")"));
    testing::ExpectPoisonOutsideView(*b_.cuda, out, what);
  }
  DType dtype() const { return GetParam(); }

  BackendPair b_;
  std::mt19937 rng_{1234};
};

TEST_P(CudaOpsTest, RmsNormMatchesCpu) {
  for (int64_t cols : {8, 96, 2048}) {
    const int64_t rows = 5;
    TwinTensor x = MakeTwin(b_, RandomValues(rows * cols, rng_, -2, 2), rows, cols, 2, 1);
    TwinTensor w = MakeTwin(b_, RandomValues(cols, rng_, 0.5, 1.5), 1, cols);
    TwinTensor out = MakeOutput(b_, dtype(), rows, cols, 3, 2);
    b_.cpu->RmsNorm(x.cpu, w.cpu, 1e-5f, out.cpu);
    b_.cuda->RmsNorm(x.cuda, w.cuda, 1e-5f, out.cuda);
    Compare(out, absl::StrCat("RmsNorm cols ", cols));
  }
  // Aligned rows (the 16-byte vector kernel), with and without a row stride, up to its largest
  // row (8192 16-bit values) and just past it (the scalar kernel again).
  for (int64_t cols : {8, 2048, 8192, 8200}) {
    for (int width : {1, 2}) {
      const int64_t rows = 3;
      TwinTensor x = MakeTwin(b_, RandomValues(rows * cols, rng_, -2, 2), rows, cols, width);
      TwinTensor w = MakeTwin(b_, RandomValues(cols, rng_, 0.5, 1.5), 1, cols);
      TwinTensor out = MakeOutput(b_, dtype(), rows, cols, width);
      b_.cpu->RmsNorm(x.cpu, w.cpu, 1e-5f, out.cpu);
      b_.cuda->RmsNorm(x.cuda, w.cuda, 1e-5f, out.cuda);
      Compare(out, absl::StrCat("RmsNorm aligned, cols ", cols, ", width x", width));
    }
  }
}

TEST_P(CudaOpsTest, MatMulMatchesCpu) {
  struct Case {
    int64_t n, k, m;
    bool aligned;  // x rows 16-byte aligned (else views at a column offset: cuBLAS)
  };
  // Aligned rows: 1 or 2 of them take the matrix-vector kernel in 16-bit types (GemvApplies),
  // 3 and more cuBLAS again; k not a multiple of the kernel's unrolled stride, m not of 8 (the
  // grid's last block partly idle).
  for (const Case c : {Case{1, 64, 48, false}, Case{7, 64, 48, false}, Case{33, 512, 300, false},
                       Case{1, 2048, 48, true}, Case{2, 64, 300, true}, Case{3, 1096, 33, true},
                       Case{4, 4104, 64, true}, Case{5, 64, 48, true}, Case{1, 64, 2058, true},
                       Case{2, 136, 4102, true}, Case{4, 64, 8203, true}}) {
    const int offset = c.aligned ? 0 : 1;
    TwinTensor x = MakeTwin(b_, RandomValues(c.n * c.k, rng_), c.n, c.k, c.aligned ? 2 : 3, offset);
    TwinTensor w = MakeTwin(b_, RandomValues(c.m * c.k, rng_), c.m, c.k);
    TwinTensor out = MakeOutput(b_, dtype(), c.n, c.m, 2, offset);
    const std::string what =
        absl::StrCat("MatMul ", c.aligned ? "aligned " : "", c.n, "x", c.k, "x", c.m);
    b_.cpu->MatMul(x.cpu, w.cpu, out.cpu);
    b_.cuda->MatMul(x.cuda, w.cuda, out.cuda);
    Compare(out, what);
    // fp32 output of 16-bit inputs (e.g. logits).
    TwinTensor out32 = MakeOutput(b_, DType::kF32, c.n, c.m);
    b_.cpu->MatMul(x.cpu, w.cpu, out32.cpu);
    b_.cuda->MatMul(x.cuda, w.cuda, out32.cuda);
    ASSERT_TRUE(b_.cuda->Synchronize().ok());
    ExpectAllClose(Read(*b_.cuda, out32.cuda), Read(*b_.cpu, out32.cpu),
                   dtype() == DType::kF32 ? 1e-4 : 1e-3, what + " to f32");
  }
}

// Which products the matrix-vector kernel takes (host logic: runs without a device).
TEST(CudaGemvTest, AppliesToAlignedSixteenBitProductsOfOneOrTwoRows) {
  alignas(16) static uint16_t buffer[64];
  cuda::GemvParams p;
  p.x = buffer;
  p.w = buffer;
  p.out = buffer;
  p.dtype = DType::kBF16;
  p.out_dtype = DType::kBF16;
  p.n = 1;
  p.m = 3;
  p.k = 16;
  p.x_stride = 16;
  p.w_stride = 24;
  p.out_stride = 3;
  EXPECT_TRUE(cuda::GemvApplies(p));
  cuda::GemvParams two = p;
  two.n = 2;
  EXPECT_TRUE(cuda::GemvApplies(two));
  auto with = [&](auto change) {
    cuda::GemvParams q = p;
    change(q);
    return cuda::GemvApplies(q);
  };
  EXPECT_TRUE(with([](cuda::GemvParams& q) { q.out_dtype = DType::kF32; }));
  EXPECT_TRUE(with([](cuda::GemvParams& q) { q.dtype = q.out_dtype = DType::kF16; }));
  EXPECT_FALSE(with([](cuda::GemvParams& q) { q.n = 0; }));
  EXPECT_FALSE(with([](cuda::GemvParams& q) { q.n = 3; }));
  EXPECT_FALSE(with([](cuda::GemvParams& q) { q.dtype = q.out_dtype = DType::kF32; }));
  EXPECT_FALSE(with([](cuda::GemvParams& q) { q.out_dtype = DType::kF16; }));
  EXPECT_FALSE(with([](cuda::GemvParams& q) { q.k = 12; }));
  EXPECT_FALSE(with([](cuda::GemvParams& q) { q.x_stride = 20; }));
  EXPECT_FALSE(with([](cuda::GemvParams& q) { q.w_stride = 20; }));
  EXPECT_FALSE(with([](cuda::GemvParams& q) { q.x = buffer + 1; }));
  EXPECT_FALSE(with([](cuda::GemvParams& q) { q.w = buffer + 4; }));
}

TEST_P(CudaOpsTest, RopeMatchesCpuOnFusedQkvViews) {
  struct Case {
    int32_t heads, kv_heads, head_dim, rope_dim;
    float base;
  };
  const std::vector<int32_t> positions = {0, 1, 2, 5, 17, 100, 1000, 4095, 8191};
  const int64_t n = static_cast<int64_t>(positions.size());
  for (const Case c :
       {Case{8, 4, 8, 8, 10000.f}, Case{4, 1, 64, 64, 10000.f}, Case{4, 2, 128, 64, 500000.f},
        // More pairs than one thread block rotates (512): 2560 pairs in 5 blocks a row; 864
        // (a partial rotary dimension) in 2, the second partly idle.
        Case{32, 8, 128, 128, 500000.f}, Case{30, 6, 64, 48, 10000.f}}) {
    Prepare(FlatBatch(positions));
    const int64_t q_dim = int64_t{c.heads} * c.head_dim;
    const int64_t kv_dim = int64_t{c.kv_heads} * c.head_dim;
    const int64_t width = q_dim + 2 * kv_dim;
    TwinTensor qkv = MakeTwin(b_, RandomValues(n * width, rng_), n, width);
    const RopeParams p{c.heads, c.kv_heads, c.head_dim, c.rope_dim, c.base};
    b_.cpu->Rope(qkv.cpu.Cols(0, q_dim), qkv.cpu.Cols(q_dim, kv_dim), p);
    b_.cuda->Rope(qkv.cuda.Cols(0, q_dim), qkv.cuda.Cols(q_dim, kv_dim), p);
    // The v columns must be untouched, so compare the whole fused row.
    Compare(qkv, absl::StrCat("Rope head_dim ", c.head_dim, " rope_dim ", c.rope_dim));
  }
}

// The same f32 [rows, cols] values on both backends, whatever the activation dtype (RoPE
// frequency factors and biases stay f32).
struct F32Twin {
  OwnedTensor cpu, cuda;
};
F32Twin MakeF32Twin(const BackendPair& b, const std::vector<float>& values, int64_t rows,
                    int64_t cols) {
  F32Twin t;
  t.cpu = *b.cpu->AllocateTensor(DType::kF32, rows, cols);
  t.cuda = *b.cuda->AllocateTensor(DType::kF32, rows, cols);
  EXPECT_TRUE(b.cpu->CopyToDevice(t.cpu.view.data, values.data(), values.size() * 4).ok());
  EXPECT_TRUE(b.cuda->CopyToDevice(t.cuda.view.data, values.data(), values.size() * 4).ok());
  return t;
}

// NEOX order, frequency factors, linear scaling and YaRN: the parameters llama.cpp's
// llama / qwen2 graphs pass to ggml_rope_ext.
TEST_P(CudaOpsTest, RopeVariantsMatchCpu) {
  struct Case {
    std::string name;
    int32_t heads, kv_heads, head_dim;
    float base;
    bool neox, factors;
    float freq_scale, ext_factor, attn_factor;
    int32_t n_ctx_orig;
  };
  const std::vector<int32_t> positions = {0, 1, 3, 64, 130, 1000, 4095, 8191};
  const int64_t n = static_cast<int64_t>(positions.size());
  for (const Case& c : std::vector<Case>{
           {"neox", 4, 2, 64, 1000000.f, true, false, 1.f, 0.f, 1.f, 0},
           {"freq factors", 8, 4, 8, 10000.f, false, true, 1.f, 0.f, 1.f, 0},
           {"freq factors head 128", 4, 1, 128, 500000.f, false, true, 1.f, 0.f, 1.f, 0},
           {"linear", 4, 2, 64, 10000.f, false, false, 0.25f, 0.f, 1.f, 0},
           {"yarn", 8, 4, 8, 10000.f, false, false, 0.25f, 1.f, 1.f, 128},
           {"yarn neox", 4, 2, 128, 1000000.f, true, false, 0.25f, 1.f, 0.9f, 32768}}) {
    Prepare(FlatBatch(positions));
    const int64_t q_dim = int64_t{c.heads} * c.head_dim;
    const int64_t kv_dim = int64_t{c.kv_heads} * c.head_dim;
    const int64_t width = q_dim + 2 * kv_dim;
    TwinTensor qkv = MakeTwin(b_, RandomValues(n * width, rng_), n, width, 2, 1);
    F32Twin factors =
        MakeF32Twin(b_, RandomValues(c.head_dim / 2, rng_, 1.f, 8.f), 1, c.head_dim / 2);
    RopeParams p{.num_heads = c.heads,
                 .num_kv_heads = c.kv_heads,
                 .head_dim = c.head_dim,
                 .rope_dim = c.head_dim,
                 .freq_base = c.base,
                 .neox = c.neox,
                 .freq_scale = c.freq_scale,
                 .ext_factor = c.ext_factor,
                 .attn_factor = c.attn_factor,
                 .n_ctx_orig = c.n_ctx_orig};
    if (c.factors) p.freq_factors = factors.cpu.view;
    b_.cpu->Rope(qkv.cpu.Cols(0, q_dim), qkv.cpu.Cols(q_dim, kv_dim), p);
    if (c.factors) p.freq_factors = factors.cuda.view;
    b_.cuda->Rope(qkv.cuda.Cols(0, q_dim), qkv.cuda.Cols(q_dim, kv_dim), p);
    Compare(qkv, absl::StrCat("Rope ", c.name));
  }
}

TEST_P(CudaOpsTest, AddBiasMatchesCpu) {
  const int64_t n = 7;
  for (int64_t cols : {int64_t{96}, int64_t{300}}) {
    TwinTensor x = MakeTwin(b_, RandomValues(n * cols, rng_), n, cols, 3, 1);
    F32Twin bias = MakeF32Twin(b_, RandomValues(cols, rng_, -2.f, 2.f), 1, cols);
    b_.cpu->AddBias(x.cpu, bias.cpu.view);
    b_.cuda->AddBias(x.cuda, bias.cuda.view);
    Compare(x, absl::StrCat("AddBias cols ", cols));
  }
  // f32 logits of a 16-bit model get the output bias too.
  TwinTensor logits = MakeOutput(b_, DType::kF32, n, 50);
  std::vector<float> zeros(n * 50, 0.f);
  ASSERT_TRUE(b_.cuda->CopyToDevice(logits.cuda.data, zeros.data(), zeros.size() * 4).ok());
  F32Twin bias = MakeF32Twin(b_, RandomValues(50, rng_), 1, 50);
  b_.cpu->AddBias(logits.cpu, bias.cpu.view);
  b_.cuda->AddBias(logits.cuda, bias.cuda.view);
  ASSERT_TRUE(b_.cuda->Synchronize().ok());
  ExpectAllClose(Read(*b_.cuda, logits.cuda), Read(*b_.cpu, logits.cpu), 0, "AddBias to f32");
}

TEST_P(CudaOpsTest, SiluMulAndAddMatchCpu) {
  const int64_t n = 6;
  const int64_t ffn = 172;
  TwinTensor gate_up = MakeTwin(b_, RandomValues(n * 2 * ffn, rng_, -4, 4), n, 2 * ffn);
  TwinTensor act = MakeOutput(b_, dtype(), n, ffn, 2, 1);
  b_.cpu->SiluMul(gate_up.cpu.Cols(0, ffn), gate_up.cpu.Cols(ffn, ffn), act.cpu);
  b_.cuda->SiluMul(gate_up.cuda.Cols(0, ffn), gate_up.cuda.Cols(ffn, ffn), act.cuda);
  Compare(act, "SiluMul");

  TwinTensor x = MakeTwin(b_, RandomValues(n * ffn, rng_), n, ffn, 2, 0);
  TwinTensor y = MakeTwin(b_, RandomValues(n * ffn, rng_), n, ffn, 3, 2);
  b_.cpu->Add(x.cpu, y.cpu);
  b_.cuda->Add(x.cuda, y.cuda);
  Compare(x, "Add");
}

TEST_P(CudaOpsTest, EmbedAndGatherLogitRowsMatchCpu) {
  const int64_t vocab = 50;
  const int64_t dim = 40;
  const std::vector<int32_t> ids = {0, 49, 7, 7, 3, 12};
  const int64_t n = static_cast<int64_t>(ids.size());
  BatchInput batch = FlatBatch(std::vector<int32_t>(ids.size(), 0), ids);
  batch.logits_indices = {5, 0, 3};
  Prepare(batch);
  TwinTensor table = MakeTwin(b_, RandomValues(vocab * dim, rng_), vocab, dim);
  TwinTensor x = MakeOutput(b_, dtype(), n, dim, 2, 1);
  b_.cpu->Embed(table.cpu, x.cpu);
  b_.cuda->Embed(table.cuda, x.cuda);
  Compare(x, "Embed");
  TwinTensor rows = MakeOutput(b_, dtype(), 3, dim);
  b_.cpu->GatherLogitRows(x.cpu, rows.cpu);
  b_.cuda->GatherLogitRows(x.cuda, rows.cuda);
  Compare(rows, "GatherLogitRows");
}

TEST_P(CudaOpsTest, WriteKvScattersThroughSlotMappingAndSkipsNegativeSlots) {
  const KvCacheShape shape{.num_layers = 2,
                           .num_blocks = 9,
                           .block_size = 16,
                           .num_kv_heads = 2,
                           .head_dim = 64,
                           .dtype = dtype()};
  const int64_t cache_rows = 2 * shape.num_layers * int64_t{shape.num_blocks} * shape.block_size;
  const int64_t width = shape.token_elems();
  // Both caches start with the same values, so untouched slots must stay equal too.
  TwinTensor cache = MakeTwin(b_, RandomValues(cache_rows * width, rng_), cache_rows, width);
  const std::vector<int32_t> slots = {5 * 16 + 3, -1, 0, 8 * 16 + 15, 2 * 16 + 7, -1, 17};
  const int64_t n = static_cast<int64_t>(slots.size());
  BatchInput batch = FlatBatch(std::vector<int32_t>(slots.size(), 0));
  batch.slot_mapping = slots;
  Prepare(batch);
  const int64_t q_dim = 4 * int64_t{shape.head_dim};
  TwinTensor qkv = MakeTwin(b_, RandomValues(n * (q_dim + 2 * width), rng_), n, q_dim + 2 * width);
  PagedKvCache cpu_cache{cache.cpu_buffer.view.data, shape};
  cpu_cache.shape.dtype = DType::kF32;
  const PagedKvCache cuda_cache{cache.cuda_buffer.view.data, shape};
  for (int32_t layer : {1, 0}) {
    b_.cpu->WriteKv(qkv.cpu.Cols(q_dim, width), qkv.cpu.Cols(q_dim + width, width), cpu_cache,
                    layer);
    b_.cuda->WriteKv(qkv.cuda.Cols(q_dim, width), qkv.cuda.Cols(q_dim + width, width), cuda_cache,
                     layer);
  }
  Compare(cache, "WriteKv cache");
}

TEST_P(CudaOpsTest, ArgmaxAndSoftmaxRows) {
  const int64_t rows = 4;
  const int64_t vocab = 1000;
  std::vector<float> logits = RandomValues(rows * vocab, rng_, -5, 5);
  logits[0 * vocab + 999] = 9.f;
  logits[1 * vocab + 3] = 9.f;
  logits[1 * vocab + 500] = 9.f;  // a tie: the first index wins
  logits[2 * vocab + 0] = 9.f;
  TwinTensor t = MakeTwin(b_, logits, rows, vocab, 2, 1);
  std::vector<int32_t> ids(rows, -1);
  ASSERT_TRUE(CudaArgmaxRows(b_.cuda.get(), t.cuda, ids.data()).ok());
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = &t.values[r * vocab];
    EXPECT_EQ(ids[r], std::max_element(row, row + vocab) - row) << "row " << r;
  }
  auto probs = b_.cuda->AllocateTensor(DType::kF32, rows, vocab);
  ASSERT_TRUE(probs.ok());
  ASSERT_TRUE(CudaSoftmaxRows(b_.cuda.get(), t.cuda, 0.7f, probs->view).ok());
  std::vector<float> want(rows * vocab);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = &t.values[r * vocab];
    const float mx = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t c = 0; c < vocab; ++c) sum += std::exp((row[c] - mx) / 0.7);
    for (int64_t c = 0; c < vocab; ++c) want[r * vocab + c] = std::exp((row[c] - mx) / 0.7) / sum;
  }
  ExpectAllClose(Read(*b_.cuda, probs->view), want, 1e-4, "Softmax");
  EXPECT_FALSE(CudaSoftmaxRows(b_.cuda.get(), t.cuda, 0.f, probs->view).ok());
  EXPECT_FALSE(CudaArgmaxRows(b_.cpu.get(), t.cpu, ids.data()).ok());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOpsTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// ReadF32 (how logits reach the host) never DMAs into pageable memory: pageable
// destinations go through the pinned staging chunks (several chunks, and rows longer than
// a chunk, here), pinned ones get a direct copy; strided views and every dtype.
TEST_P(CudaOpsTest, ReadF32ReachesTheHostThroughPinnedMemory) {
  struct Shape {
    int64_t rows, cols;
  };
  for (const Shape s : {Shape{3, 40}, Shape{300, 5000}, Shape{2, 1200000}}) {
    SCOPED_TRACE(absl::StrCat(s.rows, " x ", s.cols));
    TwinTensor x = MakeTwin(b_, RandomValues(s.rows * s.cols, rng_), s.rows, s.cols, 2, 1);
    const absl::StatusOr<CudaReadCounts> before = CudaLastReads(b_.cuda.get());
    ASSERT_TRUE(before.ok());
    std::vector<float> pageable(static_cast<size_t>(s.rows * s.cols), -1.f);
    ASSERT_TRUE(b_.cuda->ReadF32(x.cuda, pageable.data()).ok());
    EXPECT_EQ(pageable, x.values);
    float* pinned = nullptr;
    ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), pageable.size() * 4), cudaSuccess);
    const absl::Status st = b_.cuda->ReadF32(x.cuda, pinned);
    const std::vector<float> got(pinned, pinned + pageable.size());
    cudaFreeHost(pinned);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(got, x.values);
    const absl::StatusOr<CudaReadCounts> after = CudaLastReads(b_.cuda.get());
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->direct - before->direct, 1);
    EXPECT_GE(after->staged - before->staged, 1);
  }
}

TEST(CudaBackendTest, ReportsErrorsAtSynchronize) {
  PAGODA_SKIP_WITHOUT_CUDA();
  auto cuda = CreateCudaBackend({.device = DeviceKind::kCuda}, {.dtype = DType::kF32});
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  Backend& be = **cuda;
  EXPECT_EQ(be.name(), "cuda");
  EXPECT_EQ(be.activation_dtype(), DType::kF32);
  auto a = be.AllocateTensor(DType::kF32, 4, 8);
  auto w = be.AllocateTensor(DType::kF32, 3, 7);
  ASSERT_TRUE(a.ok() && w.ok());
  be.Rope(a->view, a->view, {1, 1, 8, 8, 10000.f});  // no batch yet
  EXPECT_EQ(be.Synchronize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(be.Synchronize().ok());  // reported once
  be.MatMul(a->view, w->view, a->view);
  EXPECT_EQ(be.Synchronize().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(be.Allocate(size_t{1} << 50).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(be.Synchronize().ok());
}

// Needs no device: parsing of the environment settings.
TEST(CudaOptionsTest, ReadsTheEnvironment) {
  setenv("PAGODA_CUDA_DTYPE", "f32", 1);
  setenv("PAGODA_CUDA_ATTENTION", "generic", 1);
  setenv("PAGODA_CUDA_SPLIT_KV", "256", 1);
  auto o = CudaOptionsFromEnv();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->dtype, DType::kF32);
  EXPECT_TRUE(o->generic_attention);
  EXPECT_EQ(o->split_kv_partition, 256);
  setenv("PAGODA_CUDA_SPLIT_KV", "off", 1);
  setenv("PAGODA_CUDA_DTYPE", "f16", 1);
  o = CudaOptionsFromEnv();
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->dtype, DType::kF16);
  EXPECT_EQ(o->split_kv_partition, 0);
  setenv("PAGODA_CUDA_DTYPE", "int8", 1);
  EXPECT_EQ(CudaOptionsFromEnv().status().code(), absl::StatusCode::kInvalidArgument);
  unsetenv("PAGODA_CUDA_DTYPE");
  unsetenv("PAGODA_CUDA_ATTENTION");
  unsetenv("PAGODA_CUDA_SPLIT_KV");
  o = CudaOptionsFromEnv();
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->dtype, DType::kBF16);
  EXPECT_FALSE(o->generic_attention);
  EXPECT_LT(o->split_kv_partition, 0);
  EXPECT_TRUE(o->graphs);
}

// Needs no device: CUDA graphs on by default, off by the flag or (no flag) the environment.
TEST(CudaOptionsTest, GraphsOnUnlessTurnedOff) {
  unsetenv("PAGODA_CUDA_GRAPHS");
  EXPECT_TRUE(CudaOptionsFrom({})->graphs);
  EXPECT_FALSE(CudaOptionsFrom({.cuda_graphs = "off"})->graphs);
  setenv("PAGODA_CUDA_GRAPHS", "off", 1);
  EXPECT_FALSE(CudaOptionsFrom({})->graphs);
  EXPECT_TRUE(CudaOptionsFrom({.cuda_graphs = "on"})->graphs);
  setenv("PAGODA_CUDA_GRAPHS", "sometimes", 1);
  EXPECT_EQ(CudaOptionsFrom({}).status().message(),
            "PAGODA_CUDA_GRAPHS=sometimes: expected on or off");
  unsetenv("PAGODA_CUDA_GRAPHS");
}

// Needs no device: the flags (BackendOptions) win over the environment, and errors name
// where the value came from.
TEST(CudaOptionsTest, FlagsWinOverTheEnvironment) {
  setenv("PAGODA_CUDA_DTYPE", "f32", 1);
  setenv("PAGODA_CUDA_SPLIT_KV", "64", 1);
  auto o = CudaOptionsFrom({.cuda_dtype = "f16", .cuda_attention = "generic"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->dtype, DType::kF16);
  EXPECT_TRUE(o->generic_attention);
  EXPECT_EQ(o->split_kv_partition, 64);  // no flag: the environment's
  EXPECT_EQ(CudaOptionsFrom({.cuda_split_kv = "lots"}).status().message(),
            "--cuda-split-kv lots: expected auto, off or a partition size in tokens");
  setenv("PAGODA_CUDA_ATTENTION", "fast", 1);
  EXPECT_EQ(CudaOptionsFrom({}).status().message(),
            "PAGODA_CUDA_ATTENTION=fast: expected auto or generic");
  unsetenv("PAGODA_CUDA_DTYPE");
  unsetenv("PAGODA_CUDA_ATTENTION");
  unsetenv("PAGODA_CUDA_SPLIT_KV");
}

}  // namespace
}  // namespace pagoda::kernels
