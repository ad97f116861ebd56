#include "kernels/cpu/cpu_f32_matmul.h"

#include "kernels/cpu/cpu_f32_matmul_impl.h"

namespace pagoda::kernels::cpu {
namespace {

using DotFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t,
                       int64_t, int64_t);

struct Kernel {
  DotFn fn;
  const char* name;
};

Kernel Pick() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return {&F32DotAvx512, "avx512"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {&F32DotAvx2, "avx2"};
  }
#endif
  return {nullptr, "none"};
}

const Kernel& Selected() {
  static const Kernel kernel = Pick();
  return kernel;
}

}  // namespace

bool HasF32DotKernel() { return Selected().fn != nullptr; }

const char* F32DotKernelName() { return Selected().name; }

void F32MatMulColumns(const Tensor& x, const Tensor& w, const Tensor& out, int64_t m0, int64_t m1) {
  Selected().fn(x.row<const float>(0), x.stride, w.row<const float>(m0), w.stride,
                out.row<float>(0) + m0, out.stride, x.rows, m1 - m0, x.cols);
}

}  // namespace pagoda::kernels::cpu
