#include "server/tenant_registry.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "pagoda/v1/tenants.pb.h"

namespace pagoda::server {
namespace {

absl::Status Invalid(int index, const std::string& name, absl::string_view field,
                     absl::string_view problem) {
  const std::string who =
      name.empty() ? absl::StrCat("tenants[", index, "]") : absl::StrCat("tenant \"", name, "\"");
  return absl::InvalidArgumentError(absl::StrCat(who, ": ", field, ": ", problem));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(static_cast<unsigned char>(c));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::optional<KeyDigest> ParseDigest(absl::string_view hex) {
  KeyDigest d;
  if (hex.size() != 2 * d.size()) return std::nullopt;
  for (size_t i = 0; i < d.size(); ++i) {
    const int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return d;
}

std::optional<engine::PriorityClass> ParsePriority(absl::string_view name) {
  if (name.empty() || name == "standard") return engine::PriorityClass::kStandard;
  if (name == "critical") return engine::PriorityClass::kCritical;
  if (name == "sheddable") return engine::PriorityClass::kSheddable;
  return std::nullopt;
}

// Validates one entry (`index` in the file) into a Tenant; `seen_digests` spans the file.
absl::StatusOr<Tenant> ToTenant(const v1::TenantSpec& spec, int index,
                                absl::flat_hash_set<std::string>* seen_digests) {
  const std::string& name = spec.name();
  if (name.empty()) return Invalid(index, name, "name", "required (non-empty)");
  // Metrics label the anonymous tenant "anonymous" (tests/metrics_test.cc).
  if (name == "anonymous") return Invalid(index, name, "name", "\"anonymous\" is reserved");
  Tenant t;
  t.engine.name = name;
  if (spec.api_key_sha256().empty()) {
    return Invalid(index, name, "api_key_sha256", "required (at least one digest)");
  }
  for (int k = 0; k < spec.api_key_sha256_size(); ++k) {
    const std::string field = absl::StrCat("api_key_sha256[", k, "]");
    const std::optional<KeyDigest> d = ParseDigest(spec.api_key_sha256(k));
    if (!d.has_value()) {
      return Invalid(index, name, field, "not a SHA-256 digest (64 hex characters)");
    }
    if (!seen_digests->insert(std::string(d->begin(), d->end())).second) {
      return Invalid(index, name, field, "this key already belongs to a tenant");
    }
    t.key_digests.push_back(*d);
  }
  t.engine.weight = spec.has_weight() ? spec.weight() : 1.0;
  if (!(t.engine.weight > 0) || std::isinf(t.engine.weight)) {
    return Invalid(index, name, "weight", "must be > 0");
  }
  const std::optional<engine::PriorityClass> priority = ParsePriority(spec.priority());
  if (!priority.has_value()) {
    return Invalid(
        index, name, "priority",
        absl::StrCat("\"", spec.priority(), "\" is not critical, standard or sheddable"));
  }
  t.engine.priority = *priority;
  const std::pair<const char*, int64_t> limits[] = {
      {"max_running_requests", spec.max_running_requests()},
      {"max_queued_requests", spec.max_queued_requests()},
      {"kv_cache_cap_blocks", spec.kv_cache_cap_blocks()},
      {"kv_cache_floor_blocks", spec.kv_cache_floor_blocks()},
      {"tokens_per_minute", spec.tokens_per_minute()},
      {"burst_tokens", spec.burst_tokens()},
  };
  for (const auto& [field, value] : limits) {
    if (value < 0) return Invalid(index, name, field, "must be >= 0 (0 = no limit)");
  }
  if (spec.kv_cache_cap_blocks() > 0 && spec.kv_cache_floor_blocks() > spec.kv_cache_cap_blocks()) {
    return Invalid(index, name, "kv_cache_floor_blocks", "exceeds kv_cache_cap_blocks");
  }
  t.engine.max_running_requests = spec.max_running_requests();
  t.engine.max_queued_requests = spec.max_queued_requests();
  t.engine.kv_cache_cap_blocks = spec.kv_cache_cap_blocks();
  t.engine.kv_cache_floor_blocks = spec.kv_cache_floor_blocks();
  if (spec.burst_tokens() > spec.tokens_per_minute()) {
    return Invalid(
        index, name, "burst_tokens",
        spec.tokens_per_minute() == 0 ? "needs tokens_per_minute" : "exceeds tokens_per_minute");
  }
  t.tokens_per_minute = spec.tokens_per_minute();
  t.burst_tokens = spec.burst_tokens();
  return t;
}

// "Bearer <key>" (the scheme is case-insensitive) -> "<key>"; nullopt otherwise.
std::optional<absl::string_view> BearerKey(absl::string_view value) {
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() || !absl::StartsWithIgnoreCase(value, kScheme)) {
    return std::nullopt;
  }
  return value.substr(kScheme.size());
}

}  // namespace

KeyDigest Sha256(absl::string_view data) {
  KeyDigest d;
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d.data());
  return d;
}

absl::StatusOr<TenantTable> ParseTenantsJson(absl::string_view json) {
  v1::TenantsFile file;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &file, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tenants file: not valid: ", std::string(parsed.message())));
  }
  TenantTable table;
  absl::flat_hash_set<std::string> names, digests;
  for (int i = 0; i < file.tenants_size(); ++i) {
    absl::StatusOr<Tenant> t = ToTenant(file.tenants(i), i, &digests);
    if (!t.ok()) return t.status();
    if (!names.insert(t->engine.name).second) {
      return Invalid(i, t->engine.name, "name", "appears twice");
    }
    table.tenants.push_back(*std::move(t));
  }
  if (table.tenants.empty()) {
    return absl::InvalidArgumentError("tenants file: tenants: at least one tenant is required");
  }
  return table;
}

absl::StatusOr<TenantTable> LoadTenantsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read tenants file ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<TenantTable> table = ParseTenantsJson(text.str());
  if (!table.ok()) {
    return absl::Status(table.status().code(), absl::StrCat(path, ": ", table.status().message()));
  }
  return table;
}

TenantTable SingleKeyTable(absl::string_view api_key) {
  TenantTable table;
  Tenant& t = table.tenants.emplace_back();
  t.key_digests.push_back(Sha256(api_key));
  return table;
}

TenantRegistry::TenantRegistry(TenantTable table, TokenBucket::Clock clock)
    : clock_(std::move(clock)) {
  Replace(std::move(table));
}

std::shared_ptr<const TenantRegistry::Snapshot> TenantRegistry::Current() const {
  MutexLock lock(&mu_);
  return snapshot_;
}

void TenantRegistry::Replace(TenantTable table) {
  auto next = std::make_shared<Snapshot>();
  next->anonymous = std::make_shared<const Tenant>();
  std::shared_ptr<const Snapshot> previous = Current();
  for (const Tenant& t : table.tenants) {
    std::shared_ptr<TokenBucket> bucket;
    if (t.tokens_per_minute > 0) {
      // A tenant that stays keeps its bucket (and its debt) across reloads.
      for (size_t i = 0; previous != nullptr && i < previous->table.tenants.size(); ++i) {
        if (previous->table.tenants[i].engine.name == t.engine.name && previous->buckets[i]) {
          bucket = previous->buckets[i];
        }
      }
      if (bucket) {
        bucket->SetRate(t.tokens_per_minute, t.burst_tokens);
      } else {
        bucket = std::make_shared<TokenBucket>(t.tokens_per_minute, t.burst_tokens, clock_);
      }
    }
    next->buckets.push_back(std::move(bucket));
  }
  next->table = std::move(table);
  MutexLock lock(&mu_);
  snapshot_ = std::move(next);
}

absl::StatusOr<Caller> TenantRegistry::Authenticate(
    std::optional<absl::string_view> authorization) const {
  std::shared_ptr<const Snapshot> s = Current();
  if (s->table.tenants.empty()) return Caller{.tenant = s->anonymous, .bucket = nullptr};
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(
        "missing API key: send the metadata 'authorization: Bearer <key>'");
  }
  const std::optional<absl::string_view> key = BearerKey(*authorization);
  if (!key.has_value()) {
    return absl::UnauthenticatedError("authorization: expected 'Bearer <key>'");
  }
  const KeyDigest digest = Sha256(*key);
  // Every digest is compared, whatever matched before: the time taken does not depend on
  // which tenant (if any) holds the key.
  int found = -1;
  for (size_t i = 0; i < s->table.tenants.size(); ++i) {
    for (const KeyDigest& d : s->table.tenants[i].key_digests) {
      const int differs = CRYPTO_memcmp(d.data(), digest.data(), d.size());
      found = differs == 0 ? static_cast<int>(i) : found;
    }
  }
  if (found < 0) return absl::UnauthenticatedError("unknown API key");
  return Caller{.tenant = std::shared_ptr<const Tenant>(s, &s->table.tenants[found]),
                .bucket = s->buckets[found]};
}

std::vector<engine::TenantConfig> TenantRegistry::EngineTenants() const {
  std::shared_ptr<const Snapshot> s = Current();
  std::vector<engine::TenantConfig> out;
  for (const Tenant& t : s->table.tenants) {
    if (!t.engine.name.empty()) out.push_back(t.engine);
  }
  return out;
}

bool TenantRegistry::open() const { return Current()->table.tenants.empty(); }

}  // namespace pagoda::server
