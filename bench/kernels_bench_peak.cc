#include "bench/kernels_bench_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu_isa.h"

namespace pagoda::bench {
namespace {

constexpr int kAccumulators = 12;  // enough independent chains to hide FMA latency

__attribute__((target("avx512f"))) double FmaAvx512(int64_t iters, float* sink) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(1.f + i * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm512_add_ps(sum, acc[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  for (float v : lanes) *sink += v;
  return 2.0 * 16 * kAccumulators * static_cast<double>(iters);
}

__attribute__((target("avx2,fma"))) double FmaAvx2(int64_t iters, float* sink) {
  __m256 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_ps(1.f + i * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  for (float v : lanes) *sink += v;
  return 2.0 * 8 * kAccumulators * static_cast<double>(iters);
}

double FmaScalar(int64_t iters, float* sink) {
  float acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = 1.f + i * 1e-3f;
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
  }
  for (float v : acc) *sink += v;
  return 2.0 * kAccumulators * static_cast<double>(iters);
}

// Each: kAccumulators independent chains of acc += the int32 lane sums of a * b (unsigned
// times signed bytes); returns 2 operations per byte product.
__attribute__((target("avx512f,avx512vnni"))) double Int8Vnni(int64_t iters, int32_t* sink) {
  __m512i acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  alignas(64) int32_t lanes[16];
  for (int i = 0; i < kAccumulators; ++i) {
    _mm512_store_si512(lanes, acc[i]);
    for (int32_t v : lanes) *sink += v;
  }
  return 2.0 * 64 * kAccumulators * static_cast<double>(iters);
}

__attribute__((target("avx512f,avx512bw"))) double Int8Avx512(int64_t iters, int32_t* sink) {
  __m512i acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2), one = _mm512_set1_epi16(1);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < kAccumulators; ++i) {
      acc[i] = _mm512_add_epi32(acc[i], _mm512_madd_epi16(_mm512_maddubs_epi16(a, b), one));
    }
  }
  alignas(64) int32_t lanes[16];
  for (int i = 0; i < kAccumulators; ++i) {
    _mm512_store_si512(lanes, acc[i]);
    for (int32_t v : lanes) *sink += v;
  }
  return 2.0 * 64 * kAccumulators * static_cast<double>(iters);
}

__attribute__((target("avx2"))) double Int8Avx2(int64_t iters, int32_t* sink) {
  __m256i acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_epi32(i);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < kAccumulators; ++i) {
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), one));
    }
  }
  alignas(32) int32_t lanes[8];
  for (int i = 0; i < kAccumulators; ++i) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[i]);
    for (int32_t v : lanes) *sink += v;
  }
  return 2.0 * 32 * kAccumulators * static_cast<double>(iters);
}

double Int8Scalar(int64_t iters, int32_t* sink) {
  int32_t acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = i;
  const int32_t a = 3 + (*sink & 1), b = -2;
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < kAccumulators; ++i) {
      acc[i] += a * b;
      asm volatile("" : "+r"(acc[i]));  // one multiply-add per round, not folded
    }
  }
  for (int32_t v : acc) *sink += v;
  return 2.0 * kAccumulators * static_cast<double>(iters);
}

}  // namespace

// The peaks of the active level (kernels/cpu_isa.h: --cpu-isa caps them as it caps the
// kernels), so every level's kernels are measured against their own level's peaks.
const char* Int8Isa() {
  switch (kernels::ActiveCpuIsa()) {
    case kernels::CpuIsa::kAvx512Vnni:
      return "avx512vnni";
    case kernels::CpuIsa::kAvx512:
      return "avx512bw";
    case kernels::CpuIsa::kAvx2:
      return "avx2";
    case kernels::CpuIsa::kPortable:
      break;
  }
  return "scalar";
}

double Int8Loop(int64_t iters, int32_t* sink) {
  const std::string isa = Int8Isa();
  if (isa == "avx512vnni") return Int8Vnni(iters, sink);
  if (isa == "avx512bw") return Int8Avx512(iters, sink);
  if (isa == "avx2") return Int8Avx2(iters, sink);
  return Int8Scalar(iters, sink);
}

const char* FmaIsa() {
  if (kernels::CpuIsaActive(kernels::CpuIsa::kAvx512)) return "avx512";
  if (kernels::CpuIsaActive(kernels::CpuIsa::kAvx2)) return "avx2";
  return "scalar";
}

double FmaLoop(int64_t iters, float* sink) {
  const char* isa = FmaIsa();
  if (isa[4] == '5') return FmaAvx512(iters, sink);
  if (isa[0] == 'a') return FmaAvx2(iters, sink);
  return FmaScalar(iters, sink);
}

void ParallelCopy(void* dst, const void* src, size_t bytes, int threads) {
  if (threads <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  std::vector<std::thread> pool;
  const size_t chunk = (bytes / threads + 63) / 64 * 64;
  for (int t = 0; t < threads; ++t) {
    const size_t begin = std::min(bytes, t * chunk), end = std::min(bytes, begin + chunk);
    pool.emplace_back([=] {
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                  end - begin);
    });
  }
  for (std::thread& t : pool) t.join();
}

}  // namespace pagoda::bench
