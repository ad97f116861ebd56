#include "kernels/profiling_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pagoda::kernels {

ProfilingBackend::ProfilingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

std::vector<ProfilingBackend::OpTime> ProfilingBackend::TakeTimes() {
  std::vector<OpTime> out;
  out.swap(times_);
  index_.clear();
  return out;
}

ProfilingBackend::Clock::time_point ProfilingBackend::Begin() {
  if (!enabled_) return {};
  Keep(inner_->Synchronize());
  return Clock::now();
}

void ProfilingBackend::End(std::string_view label, Clock::time_point start) {
  if (!enabled_) return;
  Keep(inner_->Synchronize());
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  auto [it, inserted] = index_.try_emplace(std::string(label), times_.size());
  if (inserted) times_.push_back({std::string(label), 0, 0});
  times_[it->second].seconds += seconds;
  ++times_[it->second].calls;
}

void ProfilingBackend::Keep(absl::Status status) {
  if (pending_.ok() && !status.ok()) pending_ = std::move(status);
}

absl::StatusOr<DeviceBuffer> ProfilingBackend::Allocate(size_t bytes) {
  return inner_->Allocate(bytes);
}

absl::Status ProfilingBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  return inner_->CopyToDevice(dst, src, bytes);
}

absl::Status ProfilingBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  absl::Status status = inner_->CopyToHost(dst, src, bytes);
  if (!pending_.ok()) return std::exchange(pending_, absl::OkStatus());
  return status;
}

absl::Status ProfilingBackend::Zero(void* dst, size_t bytes) { return inner_->Zero(dst, bytes); }

absl::StatusOr<OwnedTensor> ProfilingBackend::CreateWeight(const float* host, int64_t rows,
                                                           int64_t cols) {
  return inner_->CreateWeight(host, rows, cols);
}

absl::StatusOr<OwnedTensor> ProfilingBackend::CreateWeightRaw(DType type, const void* data,
                                                              int64_t rows, int64_t cols) {
  return inner_->CreateWeightRaw(type, data, rows, cols);
}

absl::Status ProfilingBackend::ReadF32(const Tensor& x, float* host) {
  const Clock::time_point start = Begin();
  absl::Status status = inner_->ReadF32(x, host);
  End("read_logits", start);
  if (!pending_.ok()) return std::exchange(pending_, absl::OkStatus());
  return status;
}

absl::Status ProfilingBackend::Synchronize() {
  absl::Status status = inner_->Synchronize();
  if (!pending_.ok()) return std::exchange(pending_, absl::OkStatus());
  return status;
}

absl::Status ProfilingBackend::PrepareMatMulWeight(OwnedTensor* weight) {
  return inner_->PrepareMatMulWeight(weight);
}

void ProfilingBackend::NameWeight(const Tensor& weight, std::string_view role) {
  weight_labels_[weight.data] = absl::StrCat("matmul ", std::string(role));
  inner_->NameWeight(weight, role);
}

absl::Status ProfilingBackend::PrepareBatch(const BatchInput& batch) {
  const Clock::time_point start = Begin();
  absl::Status status = inner_->PrepareBatch(batch);
  End("prepare_batch", start);
  return status;
}

void ProfilingBackend::Embed(const Tensor& table, const Tensor& out) {
  const Clock::time_point start = Begin();
  inner_->Embed(table, out);
  End("embed", start);
}

void ProfilingBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps,
                               const Tensor& out) {
  const Clock::time_point start = Begin();
  inner_->RmsNorm(x, weight, eps, out);
  End("rms_norm", start);
}

void ProfilingBackend::MatMul(const Tensor& x, const Tensor& w, const Tensor& out) {
  const Clock::time_point start = Begin();
  inner_->MatMul(x, w, out);
  if (!enabled_) return;
  auto it = weight_labels_.find(w.data);
  End(it == weight_labels_.end() ? std::string_view("matmul ?") : std::string_view(it->second),
      start);
}

void ProfilingBackend::Rope(const Tensor& q, const Tensor& k, const RopeParams& params) {
  const Clock::time_point start = Begin();
  inner_->Rope(q, k, params);
  End("rope", start);
}

void ProfilingBackend::SiluMul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const Clock::time_point start = Begin();
  inner_->SiluMul(gate, up, out);
  End("silu_mul", start);
}

void ProfilingBackend::Add(const Tensor& x, const Tensor& y) {
  const Clock::time_point start = Begin();
  inner_->Add(x, y);
  End("add", start);
}

void ProfilingBackend::AddBias(const Tensor& x, const Tensor& bias) {
  const Clock::time_point start = Begin();
  inner_->AddBias(x, bias);
  End("add_bias", start);
}

void ProfilingBackend::WriteKv(const Tensor& k, const Tensor& v, const PagedKvCache& cache,
                               int32_t layer) {
  const Clock::time_point start = Begin();
  inner_->WriteKv(k, v, cache, layer);
  End("write_kv", start);
}

void ProfilingBackend::Attention(const Tensor& q, const PagedKvCache& cache, int32_t layer,
                                 const AttentionParams& params, const Tensor& out) {
  const Clock::time_point start = Begin();
  inner_->Attention(q, cache, layer, params, out);
  End("attention", start);
}

void ProfilingBackend::GatherLogitRows(const Tensor& x, const Tensor& out) {
  const Clock::time_point start = Begin();
  inner_->GatherLogitRows(x, out);
  End("gather_logits", start);
}

}  // namespace pagoda::kernels
