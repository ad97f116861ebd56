// Names of the GGUF weight types `pagoda make-model --dtype` can write.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/gguf.h"

namespace pagoda::tools {

// Every accepted (name, type) pair, in the GGUF spelling ("F32", "Q8_0", ...).
const std::vector<std::pair<std::string, gguf::TensorType>>& WeightTypeNames();
// The type named `name` (case-insensitive); InvalidArgument listing the names otherwise.
absl::StatusOr<gguf::TensorType> ParseWeightType(absl::string_view name);

}  // namespace pagoda::tools
