// Who may call the daemon and on what terms: the tenants file (`--tenants`), API-key
// authentication by SHA-256 digest, and each tenant's token bucket. The registry holds an
// immutable snapshot that a reload swaps atomically; streams keep the snapshot they started
// with, so a reload never disturbs them.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "engine/tenant.h"
#include "server/token_bucket.h"

namespace pagoda::server {

using KeyDigest = std::array<uint8_t, 32>;

// The SHA-256 digest of `data`.
KeyDigest Sha256(absl::string_view data);

// One tenant as the server sees it.
struct Tenant {
  engine::TenantConfig engine;         // name, weight, class and limits the engine enforces
  std::vector<KeyDigest> key_digests;  // the API keys it authenticates with
  int64_t tokens_per_minute = 0;       // prompt + completion tokens; 0 = no limit
  int64_t burst_tokens = 0;            // the bucket's capacity; 0 = tokens_per_minute
};

// The tenants table. No tenants: the daemon is open (one anonymous tenant, no key).
struct TenantTable {
  std::vector<Tenant> tenants;
};

// Parses and validates a tenants file's JSON (docs/API.md). InvalidArgument naming the
// tenant and field for unknown fields, duplicate names or keys, malformed digests, unknown
// priorities, weight <= 0 and negative limits.
absl::StatusOr<TenantTable> ParseTenantsJson(absl::string_view json);
// ParseTenantsJson of the file at `path`; NotFound when it cannot be read.
absl::StatusOr<TenantTable> LoadTenantsFile(const std::string& path);
// `--api-key KEY`: the anonymous tenant (name ""), which must present KEY.
TenantTable SingleKeyTable(absl::string_view api_key);

// An authenticated caller: its tenant's terms and token bucket (null when unlimited).
struct Caller {
  std::shared_ptr<const Tenant> tenant;
  std::shared_ptr<TokenBucket> bucket;
};

class TenantRegistry {
 public:
  // Starts with `table`; buckets read time from `clock`.
  explicit TenantRegistry(TenantTable table, TokenBucket::Clock clock = absl::Now);

  // Swaps in `table`; buckets of tenants that stay (by name) keep their balance. Callers
  // serialize Replace (the serve command calls it from its one signal thread).
  void Replace(TenantTable table);
  // The caller an `authorization` metadata value (nullopt when absent) names. Open
  // registry: the anonymous caller whatever was sent. Otherwise Unauthenticated for a
  // missing header, one that is not "Bearer <key>", or a key no tenant holds. Every
  // digest is compared in constant time, with no early exit.
  absl::StatusOr<Caller> Authenticate(std::optional<absl::string_view> authorization) const;
  // The engine's part of the current table (empty when open).
  std::vector<engine::TenantConfig> EngineTenants() const;
  // True when no key is required.
  bool open() const;

 private:
  struct Snapshot {
    TenantTable table;
    std::vector<std::shared_ptr<TokenBucket>> buckets;  // per tenant; null = no limit
    std::shared_ptr<const Tenant> anonymous;            // the open registry's caller
  };

  const TokenBucket::Clock clock_;
  mutable Mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Snapshot> Current() const;
};

}  // namespace pagoda::server
