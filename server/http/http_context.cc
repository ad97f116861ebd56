#include "server/http/http_context.h"

#include <vector>

namespace pagoda::server::http {

uint64_t HttpContext::Register(std::shared_ptr<GenerationLink> link, engine::RequestHandle handle) {
  MutexLock lock(&mu_);
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
    cut.swap(active_);
  }
  for (auto& [id, a] : cut) {
    a.link->Detach();
    deps_.engine->Abort(a.handle);
  }
  return static_cast<int64_t>(cut.size());
}

int64_t HttpContext::in_flight() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(active_.size());
}

}  // namespace pagoda::server::http
