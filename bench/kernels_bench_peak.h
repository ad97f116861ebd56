// The machine's measured peaks for pagoda-kernels-bench: memory copy bandwidth, fused
// multiply-add throughput and 8-bit integer dot-product throughput, so MatMul and Attention
// numbers read against them.
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
// Widest 8-bit dot product the CPU runs: "avx512vnni" (VPDPBUSD), "avx512bw" or "avx2"
// (VPMADDUBSW + VPMADDWD + VPADDD, what the quantized kernels use), or "scalar".
const char* Int8Isa();
// Runs `iters` rounds of independent unsigned x signed byte dot products accumulated into
// int32 lanes, on this thread at the widest ISA; returns the integer operations done (2 per
// byte product, as GFLOP/s counts 2 per multiply-add).
double Int8Loop(int64_t iters, int32_t* sink);
// Copies `bytes` from `src` to `dst` split over `threads` threads.
void ParallelCopy(void* dst, const void* src, size_t bytes, int threads);

}  // namespace pagoda::bench
