// Compiled once per instruction set by foreach_target.h; HWY_DYNAMIC_DISPATCH picks the best
// the running CPU has. SSSE3 adds little over SSE4 and the portable code: not built.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS HWY_SSSE3
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/cpu_elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#ifndef PAGODA_KERNELS_CPU_CPU_ELEMENTWISE_ONCE_
#define PAGODA_KERNELS_CPU_CPU_ELEMENTWISE_ONCE_
#include <cmath>

#include "kernels/cpu/cpu_elementwise.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace pagoda::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SiluMulRowImpl(const float* gate, const float* up, float* out, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(d, 1.f);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto g = hn::LoadU(d, gate + i);
    const auto silu = hn::Div(g, hn::Add(one, hn::Exp(d, hn::Neg(g))));
    hn::StoreU(hn::Mul(silu, hn::LoadU(d, up + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace pagoda::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pagoda::kernels::cpu {

HWY_EXPORT(SiluMulRowImpl);

void SiluMulRow(const float* gate, const float* up, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMulRowImpl)(gate, up, out, n);
}

}  // namespace pagoda::kernels::cpu
#endif  // HWY_ONCE
