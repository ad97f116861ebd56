#include "server/http/http_context.h"

#include <boost/asio/post.hpp>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pagoda::server::http {

absl::Status HttpContext::BusyError() {
  return absl::UnavailableError(
      absl::StrCat("server busy: ", kMaxPendingJobs, " requests are being prepared"));
}

bool HttpContext::Offload(std::function<void()> job) {
  if (workers_ == nullptr) return false;
  if (pending_jobs_.fetch_add(1) >= kMaxPendingJobs) {
    pending_jobs_.fetch_sub(1);
    return false;
  }
  boost::asio::post(*workers_, [this, job = std::move(job)] {
    job();
    pending_jobs_.fetch_sub(1);
  });
  return true;
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
