#include "engine/tenant.h"

#include "absl/strings/str_cat.h"

namespace pagoda::engine {

const char* PriorityClassName(PriorityClass priority) {
  switch (priority) {
    case PriorityClass::kCritical:
      return "critical";
    case PriorityClass::kStandard:
      return "standard";
    case PriorityClass::kSheddable:
      return "sheddable";
  }
  return "standard";
}

KvBlockLimit TenantKvLimit(const TenantConfig* config, const std::string& name,
                           int64_t others_floors, int64_t num_blocks) {
  KvBlockLimit limit{
      .blocks = num_blocks - others_floors,
      .holder = others_floors > 0 ? "the cache beyond other tenants' floors" : "the cache"};
  const int32_t cap = config != nullptr ? config->kv_cache_cap_blocks : 0;
  if (cap > 0 && cap <= limit.blocks) {
    limit.blocks = cap;
    limit.holder = absl::StrCat("tenant \"", name, "\"'s kv_cache_cap_blocks (", cap, " blocks)");
  }
  return limit;
}

}  // namespace pagoda::engine
