// The machine's measured peaks for pagoda-kernels-bench: memory copy bandwidth and fused
// multiply-add throughput, so MatMul and Attention numbers read against them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pagoda::bench {

// Widest FMA the CPU runs: "avx512", "avx2" or "scalar" (chosen at run time).
const char* FmaIsa();
// Runs `iters` rounds of independent FMAs on this thread at the widest ISA; returns the
// floating-point operations done (2 per lane per FMA). The result feeds `sink` so the
// loop is not optimized away.
double FmaLoop(int64_t iters, float* sink);
// Copies `bytes` from `src` to `dst` split over `threads` threads.
void ParallelCopy(void* dst, const void* src, size_t bytes, int threads);

}  // namespace pagoda::bench
