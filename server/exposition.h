// Pieces of the Prometheus text exposition format (version 0.0.4) shared by the metric types.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace pagoda::server {

// A sample value: integral values print exactly, others with 9 significant digits;
// infinities as +Inf/-Inf.
std::string FormatSampleValue(double v);
// `name="value"` with the value escaped as the format requires (\\, \" and \n).
std::string LabelPair(absl::string_view name, absl::string_view value);
// Appends the `# HELP` and `# TYPE` lines of metric family `name`.
void AppendFamilyHeader(absl::string_view name, absl::string_view help, absl::string_view type,
                        std::string* out);
// Appends one sample line: `name{labels} value`, or `name value` when `labels` is empty.
// `labels` is a comma-separated list of LabelPair()s.
void AppendSample(absl::string_view name, absl::string_view labels, double value, std::string* out);
// Joins two label lists with a comma (either may be empty).
std::string JoinLabels(absl::string_view a, absl::string_view b);

}  // namespace pagoda::server
