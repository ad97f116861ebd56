#include "tests/cuda_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace pagoda::testing {

using kernels::Backend;
using kernels::DType;
using kernels::OwnedTensor;
using kernels::Tensor;

BackendPair MakeBackendPair(const kernels::CudaOptions& options) {
  BackendPair b;
  auto cpu = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu});
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  if (cpu.ok()) b.cpu = std::move(*cpu);
  auto cuda = kernels::CreateCudaBackend({.device = kernels::DeviceKind::kCuda}, options);
  EXPECT_TRUE(cuda.ok()) << cuda.status();
  if (cuda.ok()) b.cuda = std::move(*cuda);
  return b;
}

kernels::BatchInput MakeAttentionBatch(const std::vector<AttentionSeq>& seqs, int32_t block_size,
                                       int32_t num_blocks, std::mt19937& rng) {
  std::vector<int32_t> pool(num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  kernels::BatchInput b;
  int32_t max_blocks = 1;
  for (const AttentionSeq& s : seqs) {
    max_blocks = std::max(max_blocks, (s.context + block_size - 1) / block_size + 1);
  }
  b.max_blocks_per_seq = max_blocks;
  b.query_start_loc = {0};
  size_t next = 0;
  for (const AttentionSeq& s : seqs) {
    std::vector<int32_t> table(max_blocks, 0);
    const int32_t used = (s.context + block_size - 1) / block_size;
    for (int32_t i = 0; i < used; ++i) table[i] = pool[next++];
    for (int32_t pos = s.context - s.q_len; pos < s.context; ++pos) {
      b.token_ids.push_back(0);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(table[pos / block_size] * block_size + pos % block_size);
    }
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
    b.query_start_loc.push_back(b.num_tokens());
    b.seq_lens.push_back(s.context);
    b.logits_indices.push_back(b.num_tokens() - 1);
  }
  return b;
}

std::vector<float> RandomValues(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void Poison(Backend& cuda, void* dst, size_t bytes) {
  const std::vector<uint8_t> ff(bytes, 0xFF);
  ASSERT_TRUE(cuda.CopyToDevice(dst, ff.data(), bytes).ok());
}

std::vector<float> Read(Backend& backend, const Tensor& t) {
  std::vector<float> host(static_cast<size_t>(t.rows * t.cols));
  const absl::Status st = backend.ReadF32(t, host.data());
  EXPECT_TRUE(st.ok()) << st;
  return host;
}

TwinTensor MakeTwin(const BackendPair& b, const std::vector<float>& values, int64_t rows,
                    int64_t cols, int width_factor, int offset) {
  TwinTensor t;
  const int64_t wide = cols * width_factor;
  std::vector<float> full(static_cast<size_t>(rows * wide), 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(&full[r * wide + offset * cols], &values[r * cols], cols * sizeof(float));
  }
  auto cuda = b.cuda->CreateWeight(full.data(), rows, wide);
  EXPECT_TRUE(cuda.ok()) << cuda.status();
  if (!cuda.ok()) return t;
  t.cuda_buffer = std::move(*cuda);
  // What the CUDA backend stores, so the reference sees the very same inputs.
  full = Read(*b.cuda, t.cuda_buffer.view);
  auto cpu = b.cpu->CreateWeight(full.data(), rows, wide);
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  if (!cpu.ok()) return t;
  t.cpu_buffer = std::move(*cpu);
  t.cuda = t.cuda_buffer.view.Cols(offset * cols, cols);
  t.cpu = t.cpu_buffer.view.Cols(offset * cols, cols);
  t.values.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(&t.values[r * cols], &full[r * wide + offset * cols], cols * sizeof(float));
  }
  return t;
}

TwinTensor MakeOutput(const BackendPair& b, DType dtype, int64_t rows, int64_t cols,
                      int width_factor, int offset) {
  TwinTensor t;
  const int64_t wide = cols * width_factor;
  auto cpu = b.cpu->AllocateTensor(DType::kF32, rows, wide);
  auto cuda = b.cuda->AllocateTensor(dtype, rows, wide);
  EXPECT_TRUE(cpu.ok() && cuda.ok());
  if (!cpu.ok() || !cuda.ok()) return t;
  t.cpu_buffer = std::move(*cpu);
  t.cuda_buffer = std::move(*cuda);
  EXPECT_TRUE(b.cpu->Zero(t.cpu_buffer.view.data, t.cpu_buffer.buffer.bytes()).ok());
  Poison(*b.cuda, t.cuda_buffer.view.data, t.cuda_buffer.buffer.bytes());
  t.poisoned = true;
  t.cpu = t.cpu_buffer.view.Cols(offset * cols, cols);
  t.cuda = t.cuda_buffer.view.Cols(offset * cols, cols);
  return t;
}

void ExpectPoisonOutsideView(Backend& cuda, const TwinTensor& t, const std::string& what) {
  if (!t.poisoned) return;
  const Tensor& whole = t.cuda_buffer.view;
  const size_t elem = kernels::DTypeSize(whole.dtype);
  std::vector<uint8_t> bytes(t.cuda_buffer.buffer.bytes());
  const absl::Status st = cuda.CopyToHost(bytes.data(), whole.data, bytes.size());
  ASSERT_TRUE(st.ok()) << st;
  const int64_t first =
      (static_cast<const char*>(t.cuda.data) - static_cast<const char*>(whole.data)) /
      static_cast<int64_t>(elem);
  size_t bad = 0;
  std::string examples;
  for (int64_t r = 0; r < whole.rows; ++r) {
    for (int64_t c = 0; c < whole.stride; ++c) {
      const int64_t inside = r * whole.stride + c - first;
      if (inside >= 0 && inside / t.cuda.stride < t.cuda.rows &&
          inside % t.cuda.stride < t.cuda.cols) {
        continue;
      }
      const uint8_t* e = bytes.data() + static_cast<size_t>(r * whole.stride + c) * elem;
      if (std::any_of(e, e + elem, [](uint8_t b) { return b != 0xFF; })) {
        if (++bad <= 5) absl::StrAppend(&examples, "\n  row ", r, " col ", c);
      }
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " elements outside the view were written"
                     << examples;
}

double Tolerance(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return 2e-2;
    case DType::kF16:
      return 5e-3;
    default:
      return 1e-4;
  }
}

void ExpectAllClose(const std::vector<float>& got, const std::vector<float>& want, double tol,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double sum_sq = 0;
  for (float w : want) sum_sq += double{w} * w;
  const double rms = want.empty() ? 0 : std::sqrt(sum_sq / want.size());
  size_t bad = 0;
  std::string examples;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double{got[i]} - want[i]);
    if (!(err <= tol * (std::fabs(want[i]) + rms))) {  // NaN fails too
      if (++bad <= 5) absl::StrAppend(&examples, "\n  [", i, "] got ", got[i], " want ", want[i]);
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ (tol "
                     << tol << ", rms " << rms << ")" << examples;
}

}  // namespace pagoda::testing
