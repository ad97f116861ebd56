#include "server/http/http_context.h"

#include <boost/asio/post.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/thread_cpu.h"
#include "spdlog/spdlog.h"

namespace pagoda::server::http {

absl::Status HttpContext::Offload(const std::string& tenant, std::function<void()> job) {
  if (workers_ == nullptr) return absl::UnavailableError("server busy: no preparation threads");
  {
    MutexLock lock(&jobs_mu_);
    if (pending_jobs_ >= kMaxPendingJobs) {
      return absl::UnavailableError(
          absl::StrCat("server busy: ", kMaxPendingJobs, " requests are being prepared"));
    }
    int32_t& mine = pending_by_tenant_[tenant];
    if (mine >= kMaxPendingJobsPerTenant) {
      return absl::ResourceExhaustedError(absl::StrCat("tenant \"", TenantLabel(tenant), "\" has ",
                                                       mine, " requests being prepared; at most ",
                                                       kMaxPendingJobsPerTenant));
    }
    ++mine;
    ++pending_jobs_;
  }
  boost::asio::post(*workers_, [this, tenant, job = std::move(job)] {
    const int64_t start = ThreadCpuMicros();
    try {
      job();
    } catch (const std::exception& e) {
      spdlog::error("a preparation job failed: {}", e.what());
    } catch (...) {
      spdlog::error("a preparation job failed with an unknown exception");
    }
    if (deps_.metrics != nullptr) {
      deps_.metrics->ForTenant(tenant).preparation_cpu_us += ThreadCpuMicros() - start;
    }
    MutexLock lock(&jobs_mu_);
    --pending_jobs_;
    if (--pending_by_tenant_[tenant] == 0) pending_by_tenant_.erase(tenant);
  });
  return absl::OkStatus();
}

std::optional<uint64_t> HttpContext::Register(std::shared_ptr<GenerationLink> link,
                                              engine::RequestHandle handle) {
  MutexLock lock(&mu_);
  if (cut_) return std::nullopt;
  const uint64_t id = next_id_++;
  active_.emplace(id, Active{std::move(link), handle});
  return id;
}

void HttpContext::Unregister(uint64_t id) {
  std::shared_ptr<GenerationLink> drop;  // released after the lock
  MutexLock lock(&mu_);
  auto it = active_.find(id);
  if (it == active_.end()) return;
  drop = std::move(it->second.link);
  active_.erase(it);
}

bool HttpContext::WaitIdle(absl::Time deadline) {
  MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_.empty(); };
  while (!idle()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    mu_.AwaitWithTimeout(idle, std::min(left, absl::Milliseconds(100)));
  }
  return true;
}

int64_t HttpContext::CutAll() {
  std::map<uint64_t, Active> cut;
  {
    MutexLock lock(&mu_);
    cut_ = true;
    cut.swap(active_);
  }
  for (auto& [id, a] : cut) {
    a.link->Detach();
    client().Abort(a.handle);
  }
  return static_cast<int64_t>(cut.size());
}

int64_t HttpContext::in_flight() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(active_.size());
}

}  // namespace pagoda::server::http
