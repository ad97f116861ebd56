#include "kernels/cpu/cpu_f32_matmul.h"

#include <algorithm>

#include "kernels/cpu/cpu_f32_matmul_impl.h"
#include "kernels/cpu_isa.h"

namespace pagoda::kernels::cpu {
namespace {

constexpr int64_t kBlockBytes = 512 << 10;
constexpr int64_t kDepth = 512;

using DotFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t,
                       int64_t, int64_t, bool);

struct Kernel {
  DotFn fn;
  const char* name;
};

// The kernel of the active level (cpu_isa.h), asked at every call so a cap applies at once.
const Kernel& Selected() {
  static constexpr Kernel kAvx512 = {&F32DotAvx512, "avx512"};
  static constexpr Kernel kAvx2 = {&F32DotAvx2, "avx2"};
  static constexpr Kernel kNone = {nullptr, "none"};
#if defined(__x86_64__)
  if (CpuIsaActive(CpuIsa::kAvx512)) return kAvx512;
  if (CpuIsaActive(CpuIsa::kAvx2)) return kAvx2;
#endif
  return kNone;
}

}  // namespace

bool HasF32DotKernel() { return Selected().fn != nullptr; }

const char* F32DotKernelName() { return Selected().name; }

void F32MatMulColumns(const Tensor& x, const Tensor& w, const Tensor& out, int64_t m0, int64_t m1) {
  // Activation rows go in blocks of about kBlockBytes and the depth in slices of kDepth, so
  // a tile's weight rows stay in L1 and the activation block in L2 while the kernel passes
  // every weight row of [m0, m1) over it. A decode batch at k <= 1024 is a single call.
  const int64_t k = x.cols;
  const int64_t depth = k <= 2 * kDepth ? k : kDepth;
  const int64_t block = std::max<int64_t>(8, kBlockBytes / (4 * std::max<int64_t>(depth, 1)));
  for (int64_t i = 0; i < x.rows; i += block) {
    const int64_t rows = std::min(block, x.rows - i);
    for (int64_t p = 0; p < k; p += depth) {
      Selected().fn(x.row<const float>(i) + p, x.stride, w.row<const float>(m0) + p, w.stride,
                    out.row<float>(i) + m0, out.stride, rows, m1 - m0, std::min(depth, k - p),
                    /*accumulate=*/p > 0);
    }
  }
}

}  // namespace pagoda::kernels::cpu
