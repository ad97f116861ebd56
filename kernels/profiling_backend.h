// A Backend decorator for profiling: forwards every call to the backend it wraps and adds
// the wall time of each op to a per-label total. Ops are timed between two Synchronize()
// calls of the wrapped backend, so asynchronous (CUDA) work is charged to the op that
// queued it; on the CPU backend Synchronize() costs nothing. MatMul is labelled by the role
// the model gave its weight through NameWeight ("matmul qkv", ..., "matmul ?" if unnamed).
// Used by pagoda-decode-bench --mode profile; the serving path never wraps its backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kernels/backend.h"

namespace pagoda::kernels {

class ProfilingBackend final : public Backend {
 public:
  // Time spent under one label.
  struct OpTime {
    std::string label;
    double seconds = 0;
    int64_t calls = 0;
  };

  // Wraps `inner` (not null); timing starts enabled.
  explicit ProfilingBackend(std::unique_ptr<Backend> inner);

  // The per-label totals since the last call (in order of first use), and resets them.
  std::vector<OpTime> TakeTimes();
  // Turns timing (and the synchronizations it needs) on or off.
  void set_enabled(bool on) { enabled_ = on; }
  Backend& inner() { return *inner_; }

  std::string name() const override { return inner_->name(); }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  DType kv_dtype() const override { return inner_->kv_dtype(); }
  bool SupportsKvDtype(DType dtype) const override { return inner_->SupportsKvDtype(dtype); }
  absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) override;
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::StatusOr<OwnedTensor> CreateWeight(const float* host, int64_t rows, int64_t cols) override;
  absl::StatusOr<OwnedTensor> CreateWeightRaw(DType type, const void* data, int64_t rows,
                                              int64_t cols) override;
  absl::Status PrepareMatMulWeight(OwnedTensor* weight) override;
  absl::Status ReadF32(const Tensor& x, float* host) override;
  absl::Status Synchronize() override;
  void NameWeight(const Tensor& weight, std::string_view role) override;
  absl::Status PrepareBatch(const BatchInput& batch) override;
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

 private:
  using Clock = std::chrono::steady_clock;
  // Starts timing an op: drains queued work so it is not charged to this op.
  Clock::time_point Begin();
  // Ends timing: waits for the op and adds its time to `label`.
  void End(std::string_view label, Clock::time_point start);
  // Keeps the first failure a timing Synchronize() saw, for the caller's next sync.
  void Keep(absl::Status status);

  std::unique_ptr<Backend> inner_;
  bool enabled_ = true;
  absl::Status pending_;  // failure seen by a timing sync, not yet reported
  absl::flat_hash_map<const void*, std::string> weight_labels_;
  absl::flat_hash_map<std::string, size_t> index_;  // label -> position in times_
  std::vector<OpTime> times_;
};

}  // namespace pagoda::kernels
