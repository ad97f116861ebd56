// End to end on CUDA with models that reach the tensor-core attention kernels: random
// Llama models (model/make_model.h, built in the test) with head_dim 64 and 128 and GQA,
// greedy-decoded after a multi-token prefill through a shuffled block table, compared
// with the CPU backend on the same GGUF.
//  - f32: CUDA's exact path (fp32 GEMMs without TF32, CUDA-core attention) must produce
//    the CPU's greedy token at every step, teacher-forced with the CPU's tokens; logits
//    agree within 1e-4 of (|logit| + rms), and a differing argmax must be a tie within that
//    (the sums run in another order), at most once.
//  - bf16: activations, weights and the KV cache are bf16 on CUDA (tensor-core attention
//    and GEMMs, fp32 accumulation); the CPU runs the same bf16-stored weights with fp32
//    activations. Each step is teacher-forced with the CPU's token, so one near tie does
//    not derail the rest; logits must agree within 3% of (|logit| + rms(logits)): bf16
//    keeps 8 significant bits (relative rounding 2^-9 = 0.2%) and two layers round the
//    activations and K/V about ten times on the way, each product summing hundreds of
//    such errors with random signs. Where CUDA's argmax differs, the CPU's two candidates
//    must lie within that tolerance of each other (a near tie), and at most 1 step in 8.
//  - bf16 over an fp8 e4m3 KV cache: the same, with 15% (e4m3 keeps 4 significant bits,
//    relative rounding 2^-4 = 6% at worst, on every K and V element), at most 1 step in 4.
// Skips without a device.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "model/make_model.h"
#include "tests/cuda_test_util.h"
#include "tests/seq_batch.h"

namespace pagoda::model {
namespace {

// The backend's own KV type, but f32 on the CPU: the oracle keeps the exact float32 cache
// (the CPU default is f16).
kernels::DType OracleKvDtype(const kernels::Backend& be) {
  return be.name() == "cpu" ? kernels::DType::kF32 : be.kv_dtype();
}

using kernels::BatchInput;
using kernels::KvCacheShape;
using kernels::PagedKvCache;

constexpr int32_t kBlock = 16;
constexpr int32_t kSteps = 24;
constexpr double kF32Tolerance = 1e-4;
constexpr double kBf16Tolerance = 3e-2;
constexpr double kFp8Tolerance = 0.15;

// Two small random models, one per tensor-core head_dim, both with GQA.
ModelPreset Preset(int32_t head_dim) {
  if (head_dim == 64) {
    return {"hd64", 512, 256, 2, 4, 2, 512, 2048, false, "head_dim 64, GQA 2:1"};
  }
  return {"hd128", 512, 512, 2, 4, 1, 768, 2048, false, "head_dim 128, GQA 4:1"};
}

// A prompt of `n` in-vocabulary ids (BOS first).
std::vector<int32_t> Prompt(int32_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(3, vocab - 1);
  std::vector<int32_t> p = {1};
  while (static_cast<int32_t>(p.size()) < n) p.push_back(id(rng));
  return p;
}

// One sequence decoded step by step on one model: the prompt as one prefill chunk, then one
// token per step, through a shuffled block table (the whole table each step, or with
// `grow_table` as the scheduler sends it: as many blocks as the context needs so far).
class Decoder {
 public:
  // The cache holds `kv` (default: OracleKvDtype).
  Decoder(LlamaModel* model, int32_t max_tokens, std::optional<kernels::DType> kv = std::nullopt,
          bool grow_table = false)
      : model_(model), grow_table_(grow_table) {
    const LlamaConfig& c = model->config();
    kernels::Backend& be = *model->backend();
    shape_ = {.num_layers = c.num_layers,
              .num_blocks = (max_tokens + kBlock - 1) / kBlock + 2,
              .block_size = kBlock,
              .num_kv_heads = c.num_kv_heads,
              .head_dim = c.head_dim,
              .dtype = kv.value_or(OracleKvDtype(be))};
    auto memory = be.Allocate(shape_.total_bytes());
    EXPECT_TRUE(memory.ok()) << memory.status();
    if (memory.ok()) memory_ = std::move(*memory);
    table_.resize(shape_.num_blocks);
    std::iota(table_.begin(), table_.end(), 0);
    std::shuffle(table_.begin(), table_.end(), std::mt19937(5));
  }

  // Feeds `tokens` (positions continue from the last call); returns the last one's logits.
  std::vector<float> Feed(const std::vector<int32_t>& tokens) {
    BatchInput b;
    for (int32_t id : tokens) {
      b.token_ids.push_back(id);
      b.positions.push_back(pos_);
      b.slot_mapping.push_back(table_[pos_ / kBlock] * kBlock + pos_ % kBlock);
      ++pos_;
    }
    b.query_start_loc = {0, b.num_tokens()};
    b.seq_lens = {pos_};
    b.max_blocks_per_seq = grow_table_ ? (pos_ + kBlock - 1) / kBlock : shape_.num_blocks;
    b.block_tables.assign(table_.begin(), table_.begin() + b.max_blocks_per_seq);
    b.logits_indices = {b.num_tokens() - 1};
    std::vector<float> logits(model_->config().vocab_size);
    const absl::Status st = model_->Forward(b, PagedKvCache{memory_.data(), shape_}, logits.data());
    EXPECT_TRUE(st.ok()) << st;
    return logits;
  }

 private:
  LlamaModel* model_;
  bool grow_table_;
  KvCacheShape shape_;
  kernels::DeviceBuffer memory_;
  std::vector<int32_t> table_;
  int32_t pos_ = 0;
};

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

double Rms(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += double{x} * x;
  return v.empty() ? 0 : std::sqrt(sum / v.size());
}

struct Loaded {
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<LlamaModel> model;
};

// `file` on the CPU backend, or on CUDA with `dtype` (and CUDA graphs unless `graphs` is
// false; split-KV partitions as CudaOptions::split_kv_partition says).
Loaded Load(const gguf::GgufFile& file, bool cuda, kernels::DType dtype, bool graphs = true,
            int32_t split_kv_partition = -1) {
  Loaded l;
  auto backend =
      cuda ? kernels::CreateCudaBackend(
                 {.device = kernels::DeviceKind::kCuda},
                 {.dtype = dtype, .split_kv_partition = split_kv_partition, .graphs = graphs})
           : kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 2});
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return l;
  l.backend = std::move(*backend);
  auto model = LlamaModel::Load(file, l.backend.get());
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) l.model = std::move(*model);
  return l;
}

std::unique_ptr<gguf::GgufFile> MakeFile(int32_t head_dim, gguf::TensorType type) {
  auto writer = MakeModel(Preset(head_dim), 17, type);
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return nullptr;
  auto file = gguf::GgufFile::FromBytes(writer->Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? std::move(*file) : nullptr;
}

// The random model with f32 weights for f32 activations, else bf16 weights.
std::unique_ptr<gguf::GgufFile> MakeFileOf(int32_t head_dim, kernels::DType dtype) {
  return MakeFile(head_dim,
                  dtype == kernels::DType::kF32 ? gguf::TensorType::kF32 : gguf::TensorType::kBF16);
}

// PAGODA_CUDA_GRAPHS=off, which turns graphs off in every backend (the graph tests skip).
bool GraphsOffInEnvironment() {
  const char* v = std::getenv("PAGODA_CUDA_GRAPHS");
  return v != nullptr && std::string(v) == "off";
}

// What `l`'s CUDA graphs did: `captures`, `replays` and `eager` direct runs, no failure.
void ExpectGraphCounts(const Loaded& l, int64_t captures, int64_t replays, int64_t eager) {
  absl::StatusOr<kernels::CudaGraphCounts> c = kernels::CudaGraphStats(l.backend.get());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->captures, captures);
  EXPECT_EQ(c->replays, replays);
  EXPECT_EQ(c->failed, 0);
  EXPECT_EQ(c->eager, eager);
}

class CudaRandomModelTest : public ::testing::TestWithParam<int32_t> {
 protected:
  void SetUp() override { PAGODA_SKIP_WITHOUT_CUDA(); }
};

// Decodes `prompt` then kSteps - 1 tokens on the CPU (f32) and on CUDA (`cuda_kv` cache),
// both fed the CPU's greedy token at every step (teacher forcing). At every step the logits
// must agree within `tol` of (|logit| + rms), and where the argmaxes differ the CPU's two
// candidates must lie within that of each other; at most `max_flips` such steps. `tc`: the
// CUDA attention must run on tensor cores (prefill tiles included).
void ExpectTeacherForcedTracking(Loaded& cpu, Loaded& cuda, const std::vector<int32_t>& prompt,
                                 kernels::DType cuda_kv, double tol, int32_t max_flips, bool tc) {
  const auto n = static_cast<int32_t>(prompt.size());
  Decoder on_cpu(cpu.model.get(), n + kSteps);
  Decoder on_cuda(cuda.model.get(), n + kSteps, cuda_kv);
  std::vector<float> want = on_cpu.Feed(prompt);
  std::vector<float> got = on_cuda.Feed(prompt);
  absl::StatusOr<kernels::CudaAttentionTrace> trace =
      kernels::CudaLastAttention(cuda.backend.get());
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->tensor_core, tc);
  if (tc) {
    EXPECT_GT(trace->prefill_tiles, 0);  // 64 / group tokens per tile
  }
  int32_t flips = 0;
  double worst = 0;  // the largest |got - want| / (|want| + rms) seen, for the report
  for (int32_t step = 0; step < kSteps; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step << ", prompt of " << n << " tokens");
    testing::ExpectAllClose(got, want, tol, "logits");
    const double rms = Rms(want);
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::fabs(double{got[i]} - want[i]) / (std::fabs(want[i]) + rms));
    }
    const int32_t w = Argmax(want);
    const int32_t g = Argmax(got);
    if (g != w) {
      ++flips;
      EXPECT_LE(want[w] - want[g], tol * (std::fabs(want[w]) + rms))
          << "token " << g << " instead of " << w;
    }
    if (step + 1 == kSteps) break;
    want = on_cpu.Feed({w});
    got = on_cuda.Feed({w});
    trace = kernels::CudaLastAttention(cuda.backend.get());
    ASSERT_TRUE(trace.ok());
    EXPECT_EQ(trace->tensor_core, tc);  // the decode steps take the same path
  }
  EXPECT_LE(flips, max_flips);
  ::testing::Test::RecordProperty(
      absl::StrCat("worst_logit_error_", std::string(kernels::DTypeName(cuda_kv)), "_", n),
      absl::StrCat(worst));
}

TEST_P(CudaRandomModelTest, GreedyF32EqualsCpuTokens) {
  std::unique_ptr<gguf::GgufFile> file = MakeFile(GetParam(), gguf::TensorType::kF32);
  ASSERT_NE(file, nullptr);
  Loaded cpu = Load(*file, false, kernels::DType::kF32);
  Loaded cuda = Load(*file, true, kernels::DType::kF32);
  ASSERT_TRUE(cpu.model != nullptr && cuda.model != nullptr);
  for (int32_t prompt_len : {45, 7}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << GetParam());
    ExpectTeacherForcedTracking(cpu, cuda, Prompt(prompt_len, 512, prompt_len),
                                kernels::DType::kF32, kF32Tolerance, 1, false);
  }
}

// bf16 on CUDA over a `kv` cache against the CPU's f32 on the same bf16-stored weights.
void ExpectBf16Tracking(int32_t head_dim, kernels::DType kv, double tol, int32_t max_flips) {
  SCOPED_TRACE(::testing::Message()
               << "head_dim " << head_dim << ", " << kernels::DTypeName(kv) << " cache");
  std::unique_ptr<gguf::GgufFile> file = MakeFile(head_dim, gguf::TensorType::kBF16);
  ASSERT_NE(file, nullptr);
  Loaded cpu = Load(*file, false, kernels::DType::kF32);
  Loaded cuda = Load(*file, true, kernels::DType::kBF16);
  ASSERT_TRUE(cpu.model != nullptr && cuda.model != nullptr);
  ExpectTeacherForcedTracking(cpu, cuda, Prompt(45, 512, 3), kv, tol, max_flips, true);
}

TEST_P(CudaRandomModelTest, GreedyBf16TracksCpuWithinTolerance) {
  ExpectBf16Tracking(GetParam(), kernels::DType::kBF16, kBf16Tolerance, kSteps / 8);
}

// An fp8 KV cache end to end: bf16 activations, the tensor-core kernels converting K/V tiles
// as they load them.
TEST_P(CudaRandomModelTest, GreedyBf16OverAnFp8CacheTracksCpuWithinTolerance) {
  ExpectBf16Tracking(GetParam(), kernels::DType::kF8E4M3, kFp8Tolerance, kSteps / 4);
}

// CUDA graphs of decode steps replay exactly what the ops queue: a backend with graphs and
// one without, on the same model and tokens, give bitwise equal logits at every step; the
// first decode step is captured and the rest replayed (prefill steps run directly).
TEST_P(CudaRandomModelTest, GraphReplaysGiveBitwiseTheLogitsOfDirectRuns) {
  if (GraphsOffInEnvironment()) GTEST_SKIP() << "PAGODA_CUDA_GRAPHS=off: no backend records";
  for (kernels::DType dtype : {kernels::DType::kF32, kernels::DType::kBF16}) {
    SCOPED_TRACE(::testing::Message() << kernels::DTypeName(dtype) << ", head_dim " << GetParam());
    std::unique_ptr<gguf::GgufFile> file = MakeFileOf(GetParam(), dtype);
    ASSERT_NE(file, nullptr);
    Loaded graphed = Load(*file, true, dtype, true);
    Loaded direct = Load(*file, true, dtype, false);
    ASSERT_TRUE(graphed.model != nullptr && direct.model != nullptr);
    const std::vector<int32_t> prompt = Prompt(45, 512, 11);
    Decoder a(graphed.model.get(), 45 + kSteps);
    Decoder b(direct.model.get(), 45 + kSteps);
    std::vector<float> got = a.Feed(prompt);
    std::vector<float> want = b.Feed(prompt);
    for (int32_t step = 0; step < kSteps; ++step) {
      ASSERT_EQ(got, want) << "step " << step;
      const int32_t next = Argmax(want);
      got = a.Feed({next});
      want = b.Feed({next});
    }
    // 1 prefill (direct) + kSteps decode steps: one capture, kSteps - 1 replays (the block
    // table, contexts under one split partition and the workspace keep one shape).
    ExpectGraphCounts(graphed, 1, kSteps - 1, 1);
    ExpectGraphCounts(direct, 0, 0, kSteps + 1);
  }
}

// As the scheduler sends them, decode steps change shape: the block table grows a block every
// 16 tokens and, with split-KV, a context gets more partitions. Graphs are kept per bucket
// (tables padded to a power of two, split plans to GraphBucket items), so 100 steps from
// context 6 to 105 with partitions of 32 tokens take 4 captures: tables of 1 and 2 blocks
// (nothing split), 4 (2 items), 8 (3 and 4 items, both padded to 4). Unpadded that was 9.
// The padding changes no result: the logits equal, bit for bit, a backend without graphs,
// hence without padding, at every step.
TEST_P(CudaRandomModelTest, GraphsAreKeptPerBucketAsTablesGrowAndSplitsChange) {
  if (GraphsOffInEnvironment()) GTEST_SKIP() << "PAGODA_CUDA_GRAPHS=off: no backend records";
  constexpr int32_t kPrompt = 5;
  constexpr int32_t kDecodeSteps = 100;
  for (kernels::DType dtype : {kernels::DType::kF32, kernels::DType::kBF16}) {
    SCOPED_TRACE(::testing::Message() << kernels::DTypeName(dtype) << ", head_dim " << GetParam());
    std::unique_ptr<gguf::GgufFile> file = MakeFileOf(GetParam(), dtype);
    ASSERT_NE(file, nullptr);
    Loaded graphed = Load(*file, true, dtype, true, 32);
    Loaded direct = Load(*file, true, dtype, false, 32);
    ASSERT_TRUE(graphed.model != nullptr && direct.model != nullptr);
    Decoder a(graphed.model.get(), kPrompt + kDecodeSteps, std::nullopt, true);
    Decoder b(direct.model.get(), kPrompt + kDecodeSteps, std::nullopt, true);
    const std::vector<int32_t> prompt = Prompt(kPrompt, 512, 13);
    std::vector<float> got = a.Feed(prompt);
    std::vector<float> want = b.Feed(prompt);
    int32_t split_steps = 0;
    for (int32_t step = 0; step < kDecodeSteps; ++step) {
      ASSERT_EQ(got, want) << "step " << step;
      const int32_t next = Argmax(want);
      got = a.Feed({next});
      want = b.Feed({next});
      absl::StatusOr<kernels::CudaAttentionTrace> trace =
          kernels::CudaLastAttention(graphed.backend.get());
      ASSERT_TRUE(trace.ok());
      // The trace counts real work only: contexts past 32 tokens are split, in
      // ceil(context / 32) items.
      const int32_t context = kPrompt + step + 1;
      EXPECT_EQ(trace->split_tokens, context > 32 ? 1 : 0) << "step " << step;
      EXPECT_EQ(trace->decode_items, (context + 31) / 32) << "step " << step;
      split_steps += trace->split_tokens;
    }
    ASSERT_EQ(got, want) << "last step";
    EXPECT_EQ(split_steps, kPrompt + kDecodeSteps - 32);
    ExpectGraphCounts(graphed, 4, kDecodeSteps - 4, 1);  // eager: the prompt
  }
}

// Decode steps of nearby batch sizes share one graph: a step of 3 sequences is padded to 4
// (PadDecodeBatch: the added row writes nothing and no real row reads it) and replays the
// graph of 4-sequence steps. Sequences 0-2 get bit for bit the logits of a backend running
// 4 real sequences at every step (same GEMM shapes, rows independent), while the padded
// backend alternates 3- and 4-sequence steps on one capture.
TEST_P(CudaRandomModelTest, DecodeStepsOfThreeAndFourSequencesShareOneGraph) {
  if (GraphsOffInEnvironment()) GTEST_SKIP() << "PAGODA_CUDA_GRAPHS=off: no backend records";
  for (kernels::DType dtype : {kernels::DType::kF32, kernels::DType::kBF16}) {
    SCOPED_TRACE(::testing::Message() << kernels::DTypeName(dtype) << ", head_dim " << GetParam());
    std::unique_ptr<gguf::GgufFile> file = MakeFileOf(GetParam(), dtype);
    ASSERT_NE(file, nullptr);
    Loaded mixed = Load(*file, true, dtype);
    Loaded full = Load(*file, true, dtype);
    ASSERT_TRUE(mixed.model != nullptr && full.model != nullptr);
    EXPECT_EQ(mixed.backend->RecordableBatchSize(3), 4);
    testing::SeqBatch a(mixed.model.get(), 4, mixed.backend->kv_dtype());
    testing::SeqBatch b(full.model.get(), 4, full.backend->kv_dtype());
    std::vector<int32_t> next(4);
    int32_t next3_mixed = 0;
    for (int32_t s = 0; s < 4; ++s) {  // prompts one at a time, never padded
      const std::vector<int32_t> prompt = Prompt(6 + s, 512, 20 + s);
      const std::vector<std::vector<float>> got = a.Feed({s}, {prompt});
      const std::vector<std::vector<float>> want = b.Feed({s}, {prompt});
      ASSERT_EQ(got, want) << "prompt " << s;
      next[s] = testing::ArgmaxOf(want[0]);
    }
    next3_mixed = next[3];
    constexpr int32_t kDecodeSteps = 10;
    for (int32_t step = 0; step < kDecodeSteps; ++step) {
      // `full` runs all four sequences each step; `mixed` leaves sequence 3 out of every
      // other step (3 sequences, padded to 4).
      const bool three = step % 2 == 0;
      const std::vector<int32_t> all = {0, 1, 2, 3};
      const std::vector<int32_t> seqs = three ? std::vector<int32_t>{0, 1, 2} : all;
      std::vector<std::vector<int32_t>> tokens = {{next[0]}, {next[1]}, {next[2]}};
      if (!three) tokens.push_back({next3_mixed});
      const std::vector<std::vector<float>> got = a.Feed(seqs, tokens);
      const std::vector<std::vector<float>> want =
          b.Feed(all, {{next[0]}, {next[1]}, {next[2]}, {next[3]}});
      ASSERT_EQ(got.size(), seqs.size());
      for (int32_t s = 0; s < 3; ++s) {
        ASSERT_EQ(got[s], want[s]) << "step " << step << ", sequence " << s;
        next[s] = testing::ArgmaxOf(want[s]);
      }
      next[3] = testing::ArgmaxOf(want[3]);
      if (!three) next3_mixed = testing::ArgmaxOf(got[3]);
    }
    ExpectGraphCounts(mixed, 1, kDecodeSteps - 1, 4);  // eager: the prompts
    ExpectGraphCounts(full, 1, kDecodeSteps - 1, 4);
  }
}

// The premise of the comparisons above, checked on the CPU alone (runs without a device):
// both models load in f32 and bf16 and their greedy continuations vary, so equal token
// sequences on CUDA mean something.
TEST(RandomModelPremiseTest, CpuGreedyContinuationsVary) {
  for (int32_t head_dim : {64, 128}) {
    for (gguf::TensorType type : {gguf::TensorType::kF32, gguf::TensorType::kBF16}) {
      std::unique_ptr<gguf::GgufFile> file = MakeFile(head_dim, type);
      ASSERT_NE(file, nullptr);
      Loaded cpu = Load(*file, false, kernels::DType::kF32);
      ASSERT_NE(cpu.model, nullptr);
      EXPECT_EQ(cpu.model->config().head_dim, head_dim);
      Decoder decoder(cpu.model.get(), 45 + kSteps);
      std::vector<int32_t> tokens = {Argmax(decoder.Feed(Prompt(45, 512, 3)))};
      for (int32_t step = 1; step < kSteps; ++step) {
        tokens.push_back(Argmax(decoder.Feed({tokens.back()})));
      }
      std::sort(tokens.begin(), tokens.end());
      const auto distinct = std::unique(tokens.begin(), tokens.end()) - tokens.begin();
      EXPECT_GE(distinct, 4) << "head_dim " << head_dim;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, CudaRandomModelTest, ::testing::Values(64, 128),
                         [](const ::testing::TestParamInfo<int32_t>& info) {
                           return "head_dim" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace pagoda::model
