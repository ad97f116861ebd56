// Helpers of the CUDA backend tests: a CPU (reference) and a CUDA backend side by side,
// tensors holding the same values on both, poisoned outputs and element-wise comparison.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/batch.h"
#include "kernels/cuda/cuda_backend.h"

// Skips the current test (with the reason) unless a CUDA device is usable.
#define PAGODA_SKIP_WITHOUT_CUDA()                                                \
  do {                                                                            \
    const ::absl::Status pagoda_cuda_ = ::pagoda::kernels::CudaDeviceAvailable(); \
    if (!pagoda_cuda_.ok()) GTEST_SKIP() << pagoda_cuda_.message();               \
  } while (0)

namespace pagoda::testing {

// The reference CPU backend and a CUDA backend with `options`; fails the test on error.
struct BackendPair {
  std::unique_ptr<kernels::Backend> cpu;
  std::unique_ptr<kernels::Backend> cuda;
};
BackendPair MakeBackendPair(const kernels::CudaOptions& options);

// `n` values uniform in [lo, hi).
std::vector<float> RandomValues(size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f);

// The same [rows, cols] matrix on both backends (CUDA: the activation dtype; CPU: fp32 of
// the rounded values), seen as columns [offset * cols, (offset + 1) * cols) of a buffer
// `width_factor` times wider, so strides differ from cols.
struct TwinTensor {
  kernels::OwnedTensor cpu_buffer;
  kernels::OwnedTensor cuda_buffer;
  kernels::Tensor cpu;
  kernels::Tensor cuda;
  std::vector<float> values;  // the rounded values, [rows, cols]
  bool poisoned = false;      // MakeOutput: the CUDA buffer was filled with 0xFF bytes
};
TwinTensor MakeTwin(const BackendPair& b, const std::vector<float>& values, int64_t rows,
                    int64_t cols, int width_factor = 1, int offset = 0);

// An output on both backends: CPU fp32 zeros, CUDA `dtype` filled with NaN (0xFF bytes),
// laid out like MakeTwin.
TwinTensor MakeOutput(const BackendPair& b, kernels::DType dtype, int64_t rows, int64_t cols,
                      int width_factor = 1, int offset = 0);

// Fills `bytes` of CUDA memory at `dst` with 0xFF (NaN in every dtype).
void Poison(kernels::Backend& cuda, void* dst, size_t bytes);

// Expects every CUDA byte of `t.cuda_buffer` outside the view `t.cuda` to still hold the
// 0xFF poison of MakeOutput (no stray writes beside the view); no-op unless t.poisoned.
void ExpectPoisonOutsideView(kernels::Backend& cuda, const TwinTensor& t, const std::string& what);

// A sequence of an attention batch: `context` tokens after this step, the last `q_len` of
// them new.
struct AttentionSeq {
  int32_t context;
  int32_t q_len;
};
// The batch of `seqs` (token ids 0) over blocks of `block_size`, each sequence's blocks
// drawn from a shuffled pool of `num_blocks` ids; every table one block longer than the
// longest context needs.
kernels::BatchInput MakeAttentionBatch(const std::vector<AttentionSeq>& seqs, int32_t block_size,
                                       int32_t num_blocks, std::mt19937& rng);

// Host fp32 copy of a tensor.
std::vector<float> Read(kernels::Backend& backend, const kernels::Tensor& t);

// Relative tolerance for results computed in `dtype`.
double Tolerance(kernels::DType dtype);

// Expects |got - want| <= tol * (|want| + rms(want)) for every element (NaN fails); reports
// the count and the first few mismatches under `what`.
void ExpectAllClose(const std::vector<float>& got, const std::vector<float>& want, double tol,
                    const std::string& what);

}  // namespace pagoda::testing
