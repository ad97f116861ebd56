#include "bench/tenant_spec.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pagoda::bench {
namespace {

absl::Status Bad(absl::string_view spec, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--tenant '", spec, "': ", why));
}

}  // namespace

absl::StatusOr<TenantSpec> ParseTenantSpec(absl::string_view spec, const TenantSpec& defaults) {
  TenantSpec t = defaults;
  t.name.clear();
  std::set<std::string> seen;
  for (absl::string_view field : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    const std::vector<std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
    if (kv.size() != 2) return Bad(spec, absl::StrCat("field '", field, "' is not KEY=VALUE"));
    const std::string& key = kv[0];
    const std::string& value = kv[1];
    if (!seen.insert(key).second) return Bad(spec, absl::StrCat(key, " is given twice"));
    if (key == "name") {
      t.name = value;
    } else if (key == "key") {
      t.api_key = value;
    } else if (key == "weight") {
      if (!absl::SimpleAtod(value, &t.weight) || !(t.weight > 0) || !std::isfinite(t.weight)) {
        return Bad(spec, "weight must be a number > 0");
      }
    } else if (key == "concurrency") {
      if (!absl::SimpleAtoi(value, &t.concurrency) || t.concurrency < 0) {
        return Bad(spec, "concurrency must be an integer >= 0 (0 = unlimited)");
      }
    } else if (key == "rate") {
      if (!absl::SimpleAtod(value, &t.request_rate) || !(t.request_rate > 0)) {
        return Bad(spec, "rate must be > 0 requests/s (inf = all at once)");
      }
    } else if (key == "num-prompts" || key == "num_prompts") {
      if (!absl::SimpleAtoi(value, &t.num_prompts) || t.num_prompts < 1) {
        return Bad(spec, "num-prompts must be an integer >= 1");
      }
    } else {
      return Bad(spec, absl::StrCat("unknown field '", key,
                                    "' (name, key, weight, concurrency, rate, num-prompts)"));
    }
  }
  if (t.name.empty()) return Bad(spec, "name is required");
  return t;
}

}  // namespace pagoda::bench
