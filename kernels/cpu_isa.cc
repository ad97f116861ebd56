#include "kernels/cpu_isa.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hwy/targets.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace pagoda::kernels {
namespace {

constexpr std::array<std::pair<CpuIsa, std::string_view>, 4> kNames = {{
    {CpuIsa::kPortable, "portable"},
    {CpuIsa::kAvx2, "avx2"},
    {CpuIsa::kAvx512, "avx512"},
    {CpuIsa::kAvx512Vnni, "avx512vnni"},
}};

CpuIsa Detect() {
#if defined(__x86_64__)
  // F16C through CPUID (leaf 1, ECX bit 29): clang's __builtin_cpu_supports has no "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  if (!f16c || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    return CpuIsa::kPortable;
  }
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl")) {
    return CpuIsa::kAvx2;
  }
  if (!__builtin_cpu_supports("avx512vnni")) return CpuIsa::kAvx512;
  return CpuIsa::kAvx512Vnni;
#else
  return CpuIsa::kPortable;
#endif
}

std::atomic<CpuIsa> cap{CpuIsa::kAvx512Vnni};

// Highway's targets above `isa` (on x86 a better target has a lower bit).
int64_t HwyTargetsAbove(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable:
      return HWY_EMU128 - 1;  // Highway keeps its compile-time baseline whatever is disabled
    case CpuIsa::kAvx2:
      return HWY_AVX2 - 1;
    case CpuIsa::kAvx512:
      return HWY_AVX3 - 1;
    case CpuIsa::kAvx512Vnni:
      break;
  }
  return 0;
}

}  // namespace

std::string_view CpuIsaName(CpuIsa isa) {
  for (const auto& [level, name] : kNames) {
    if (level == isa) return name;
  }
  return "?";
}

std::vector<std::string> CpuIsaFlagValues() {
  std::vector<std::string> values = {"auto"};
  for (const auto& entry : kNames) values.emplace_back(entry.second);
  return values;
}

absl::StatusOr<CpuIsa> ParseCpuIsa(std::string_view name) {
  if (name == "auto") return DetectedCpuIsa();
  for (const auto& [level, level_name] : kNames) {
    if (level_name == name) return level;
  }
  std::string all;
  for (const std::string& v : CpuIsaFlagValues()) absl::StrAppend(&all, all.empty() ? "" : ", ", v);
  return absl::InvalidArgumentError(absl::StrCat("unknown CPU instruction-set level \"",
                                                 std::string(name), "\" (one of ", all, ")"));
}

CpuIsa DetectedCpuIsa() {
  static const CpuIsa detected = Detect();
  return detected;
}

absl::Status SetCpuIsaCap(CpuIsa level) {
  if (!CpuRuns(level)) {
    return absl::FailedPreconditionError(
        absl::StrCat("this CPU runs the ", std::string(CpuIsaName(DetectedCpuIsa())),
                     " kernels at most, not ", std::string(CpuIsaName(level))));
  }
  cap.store(level, std::memory_order_relaxed);
  hwy::DisableTargets(HwyTargetsAbove(level));
  return absl::OkStatus();
}

CpuIsa ActiveCpuIsa() { return std::min(DetectedCpuIsa(), cap.load(std::memory_order_relaxed)); }

ScopedCpuIsaCap::ScopedCpuIsaCap(CpuIsa level) : previous_(ActiveCpuIsa()) {
  ok_ = SetCpuIsaCap(level).ok();
}

ScopedCpuIsaCap::~ScopedCpuIsaCap() {
  if (ok_) (void)SetCpuIsaCap(previous_);
}

}  // namespace pagoda::kernels
