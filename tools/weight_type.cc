#include "tools/weight_type.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pagoda::tools {

const std::vector<std::pair<std::string, gguf::TensorType>>& WeightTypeNames() {
  static const auto* names = new std::vector<std::pair<std::string, gguf::TensorType>>{
      {"F32", gguf::TensorType::kF32},   {"F16", gguf::TensorType::kF16},
      {"BF16", gguf::TensorType::kBF16}, {"Q4_0", gguf::TensorType::kQ4_0},
      {"Q4_1", gguf::TensorType::kQ4_1}, {"Q5_0", gguf::TensorType::kQ5_0},
      {"Q5_1", gguf::TensorType::kQ5_1}, {"Q8_0", gguf::TensorType::kQ8_0},
      {"Q2_K", gguf::TensorType::kQ2_K}, {"Q3_K", gguf::TensorType::kQ3_K},
      {"Q4_K", gguf::TensorType::kQ4_K}, {"Q5_K", gguf::TensorType::kQ5_K},
      {"Q6_K", gguf::TensorType::kQ6_K},
  };
  return *names;
}

absl::StatusOr<gguf::TensorType> ParseWeightType(absl::string_view name) {
  for (const auto& [n, type] : WeightTypeNames()) {
    if (absl::EqualsIgnoreCase(n, name)) return type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown weight type '", name, "'; expected one of ",
                   absl::StrJoin(WeightTypeNames(), ", ",
                                 [](std::string* out, const auto& p) { out->append(p.first); })));
}

}  // namespace pagoda::tools
