// The CPU instruction-set level the kernels run at: what the CPU has, capped by a setting so
// one machine can measure (and test) every level below its own. Every SIMD dispatcher of the
// CPU kernels asks ActiveCpuIsa(); the Highway kernels (attention, elementwise) are capped
// through hwy::DisableTargets. The level is process-wide, like the kernels themselves.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pagoda::kernels {

// Each level includes the ones before it.
enum class CpuIsa {
  kPortable,    // no SIMD kernel of ours (the compiler's baseline)
  kAvx2,        // AVX2 + FMA + F16C
  kAvx512,      // and AVX-512 F, BW, VL
  kAvx512Vnni,  // and AVX-512 VNNI
};

// "portable", "avx2", "avx512", "avx512vnni".
std::string_view CpuIsaName(CpuIsa isa);
// Those names and "auto" (the CPU's own level), as a flag takes them.
std::vector<std::string> CpuIsaFlagValues();
// A flag's value: a level's name, or "auto" for DetectedCpuIsa().
absl::StatusOr<CpuIsa> ParseCpuIsa(std::string_view name);

// The highest level this CPU runs (checked once).
CpuIsa DetectedCpuIsa();
// Whether this CPU runs `isa` (tests call a level's kernels directly where it does).
inline bool CpuRuns(CpuIsa isa) { return isa <= DetectedCpuIsa(); }

// Caps the level from now on; an error, nothing changed, when the CPU does not run `cap`.
// Weight layouts chosen at load (interleaved.h) keep the level they were chosen at.
absl::Status SetCpuIsaCap(CpuIsa cap);
// The level the dispatchers use: the lower of DetectedCpuIsa() and the cap (none: the CPU's).
CpuIsa ActiveCpuIsa();
inline bool CpuIsaActive(CpuIsa isa) { return isa <= ActiveCpuIsa(); }

// Sets a cap for a scope and puts the previous one back (tests).
class ScopedCpuIsaCap {
 public:
  explicit ScopedCpuIsaCap(CpuIsa cap);
  ~ScopedCpuIsaCap();
  ScopedCpuIsaCap(const ScopedCpuIsaCap&) = delete;
  ScopedCpuIsaCap& operator=(const ScopedCpuIsaCap&) = delete;
  // False when the CPU does not run the level (nothing capped).
  bool ok() const { return ok_; }

 private:
  CpuIsa previous_;
  bool ok_;
};

}  // namespace pagoda::kernels
