// pagoda-kernels-bench: Google Benchmark micro-benchmarks of the CPU Backend.
//
//   MatMul/<type>/M:<rows>/N:<out>/K:<in>   x [M, K] * w[N, K]^T, w in f32, q8_0, q4_0,
//       q4_k, q5_k or q6_k (quantized with kernels/quant); counters GFLOP/s (2*M*N*K), weight
//       GB/s (bytes of w per product) and, for quantized weights (whose products are 8-bit
//       integer dot products), %int8_peak. Where the CPU has AVX-512 VNNI, q4_k_x16 and
//       q8_0_x16 rows: the same weights after PrepareMatMulWeight (the interleaved layouts
//       the CPU backend serves Q4_K and Q8_0 in).
//   Attention/hd:<head_dim>/batch:<seqs>/ctx:<tokens>/q:<query tokens per seq>   paged
//       attention, 12 query heads over 4 KV heads (GQA 3:1), block size 16; counter KV GB/s
//       (bytes of each sequence's K and V, read once).
//   Peak/copy, Peak/fma, Peak/int8   the machine's measured peaks: memcpy of 256 MiB (GB/s
//       counts bytes read + written) over the bench threads, an FMA loop and an 8-bit dot
//       product loop (VPDPBUSD where the CPU has AVX-512 VNNI, else the VPMADDUBSW chain the
//       kernels use; GFLOP/s or GOP/s per core and over all bench threads).
//
// Threads: --threads=N (or PAGODA_BENCH_THREADS), default 2. Every other flag is Google
// Benchmark's (--benchmark_filter, --benchmark_min_time, ...).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/kernels_bench_peak.h"
#include "kernels/backend.h"
#include "kernels/cpu_isa.h"
#include "kernels/quant/half.h"
#include "kernels/quant/interleaved.h"
#include "kernels/quant/quantize.h"

namespace pagoda::bench {
namespace {

int g_threads = 2;

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

kernels::Backend& CpuBackend() {
  static kernels::Backend* backend = [] {
    auto b =
        kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = g_threads});
    if (!b.ok()) {
      std::fprintf(stderr, "backend: %s\n", std::string(b.status().message()).c_str());
      std::exit(1);
    }
    return b->release();
  }();
  return *backend;
}

std::vector<float> RandomFloats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The FMA rate of the bench threads together (GFLOP/s) and the copy rate (GB/s, bytes read
// + written), measured once (best of a few short runs) for the %..._peak counters.
struct Peaks {
  double fma_gflops = 1;
  double int8_gops = 1;
  double copy_gbs = 1;
};

// Runs loop(iters, sink) on `threads` threads at once (FmaLoop, Int8Loop); returns the
// operations they report together.
template <typename Sink>
double OnThreads(int64_t iters, int threads, double (*loop)(int64_t, Sink*)) {
  std::vector<std::thread> pool;
  std::vector<Sink> sinks(threads * 16, Sink{0});
  std::vector<double> done(threads, 0);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { done[t] = loop(iters, &sinks[t * 16]); });
  }
  for (std::thread& th : pool) th.join();
  benchmark::DoNotOptimize(sinks.data());
  double ops = 0;
  for (double d : done) ops += d;
  return ops;
}

double FmaOnThreads(int64_t iters, int threads) { return OnThreads(iters, threads, &FmaLoop); }
double Int8OnThreads(int64_t iters, int threads) { return OnThreads(iters, threads, &Int8Loop); }

const Peaks& MeasuredPeaks() {
  static const Peaks peaks = [] {
    Peaks p;
    const size_t bytes = size_t{64} << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    for (int i = 0; i < 4; ++i) {
      const Clock::time_point t = Clock::now();
      ParallelCopy(dst.data(), src.data(), bytes, g_threads);
      p.copy_gbs = std::max(p.copy_gbs, 2.0 * bytes / 1e9 / SecondsSince(t));
    }
    for (int i = 0; i < 4; ++i) {
      const Clock::time_point t = Clock::now();
      const double flops = FmaOnThreads(1 << 20, g_threads);
      p.fma_gflops = std::max(p.fma_gflops, flops / 1e9 / SecondsSince(t));
    }
    for (int i = 0; i < 4; ++i) {
      const Clock::time_point t = Clock::now();
      const double ops = Int8OnThreads(1 << 20, g_threads);
      p.int8_gops = std::max(p.int8_gops, ops / 1e9 / SecondsSince(t));
    }
    std::fprintf(stderr,
                 "measured peaks (%d threads): copy %.1f GB/s, fma %.1f GFLOP/s (%s), int8 %.1f "
                 "GOP/s (%s)\n",
                 g_threads, p.copy_gbs, p.fma_gflops, FmaIsa(), p.int8_gops, Int8Isa());
    return p;
  }();
  return peaks;
}

// Fails the benchmark (and returns false) when `s` is an error.
bool Check(benchmark::State& state, const absl::Status& s) {
  if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  return s.ok();
}

// With `prepare`, the weight goes through PrepareMatMulWeight as a model's do (the CPU
// backend's interleaved Q4_K and Q8_0 layouts).
void BM_MatMul(benchmark::State& state, kernels::DType type, int64_t m, int64_t n, int64_t k,
               bool prepare) {
  kernels::Backend& be = CpuBackend();
  const std::vector<float> w_host = RandomFloats(n * k, 1);
  absl::StatusOr<kernels::OwnedTensor> w;
  if (type == kernels::DType::kF32) {
    w = be.CreateWeight(w_host.data(), n, k);
  } else {
    const size_t row_bytes = kernels::DTypeRowBytes(type, k);
    std::vector<uint8_t> raw(row_bytes * n);
    for (int64_t r = 0; r < n; ++r) {
      kernels::quant::QuantizeRow(type, w_host.data() + r * k, raw.data() + r * row_bytes, k);
    }
    w = be.CreateWeightRaw(type, raw.data(), n, k);
  }
  if (!Check(state, w.status())) return;
  if (prepare && !Check(state, be.PrepareMatMulWeight(&*w))) return;
  auto x = be.AllocateTensor(be.activation_dtype(), m, k);
  auto out = be.AllocateTensor(be.activation_dtype(), m, n);
  if (!Check(state, x.status()) || !Check(state, out.status())) return;
  const std::vector<float> x_host = RandomFloats(m * k, 2);
  if (!Check(state, be.CopyToDevice(x->view.data, x_host.data(), x_host.size() * 4))) return;
  const Peaks& peak = MeasuredPeaks();
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    be.MatMul(x->view, w->view, out->view);
    if (!Check(state, be.Synchronize())) return;
  }
  const double per_second = state.iterations() / SecondsSince(start);
  const double gflops = 2.0 * m * n * k * per_second / 1e9;
  const double gbs = static_cast<double>(kernels::DTypeRowBytes(type, k)) * n * per_second / 1e9;
  state.counters["GFLOP/s"] = gflops;
  state.counters["weight_GB/s"] = gbs;
  state.counters["%fma_peak"] = 100 * gflops / peak.fma_gflops;
  if (type != kernels::DType::kF32) state.counters["%int8_peak"] = 100 * gflops / peak.int8_gops;
  state.counters["%copy_peak"] = 100 * gbs / peak.copy_gbs;
}

// Attention of `batch` sequences of `ctx` tokens, the last `q_len` of each being queries.
// With `layers` > 1 the cache has that many layers and each iteration attends over the next
// one, as a model's step does: the KV read then comes from memory, not from the last level
// cache. `kv_dtype` kF32, kF16 or kBF16 (random values) or the backend's own (kind kNone).
void BM_Attention(benchmark::State& state, int32_t head_dim, int32_t batch, int32_t ctx,
                  int32_t q_len, int32_t layers, kernels::DType kv_dtype) {
  kernels::Backend& be = CpuBackend();
  constexpr int32_t kHeads = 12, kKvHeads = 4, kBlock = 16;
  const int32_t blocks_per_seq = (ctx + kBlock - 1) / kBlock;
  kernels::KvCacheShape shape{.num_layers = layers,
                              .num_blocks = batch * blocks_per_seq,
                              .block_size = kBlock,
                              .num_kv_heads = kKvHeads,
                              .head_dim = head_dim,
                              .dtype = kv_dtype};
  auto kv = be.Allocate(shape.total_bytes());
  if (!Check(state, kv.status())) return;
  {
    // Finite random K/V (f32, f16 and bf16 caches; others are left zero).
    const int64_t elems = shape.total_bytes() / static_cast<int64_t>(kernels::DTypeSize(kv_dtype));
    const std::vector<float> host = RandomFloats(elems, 3);
    absl::Status filled;
    if (kv_dtype == kernels::DType::kF32) {
      filled = be.CopyToDevice(kv->data(), host.data(), shape.total_bytes());
    } else if (kv_dtype == kernels::DType::kF16 || kv_dtype == kernels::DType::kBF16) {
      std::vector<uint16_t> half(host.size());
      for (size_t i = 0; i < host.size(); ++i) {
        half[i] = kv_dtype == kernels::DType::kF16 ? kernels::quant::FloatToHalf(host[i])
                                                   : kernels::quant::FloatToBf16(host[i]);
      }
      filled = be.CopyToDevice(kv->data(), half.data(), shape.total_bytes());
    } else {
      filled = be.Zero(kv->data(), shape.total_bytes());
    }
    if (!Check(state, filled)) return;
  }
  const kernels::PagedKvCache cache{kv->data(), shape};
  kernels::BatchInput in;
  in.max_blocks_per_seq = blocks_per_seq;
  in.query_start_loc.push_back(0);
  for (int32_t s = 0; s < batch; ++s) {
    for (int32_t j = 0; j < q_len; ++j) {
      const int32_t pos = ctx - q_len + j;
      in.token_ids.push_back(0);
      in.positions.push_back(pos);
      in.slot_mapping.push_back((s * blocks_per_seq + pos / kBlock) * kBlock + pos % kBlock);
    }
    in.query_start_loc.push_back(in.num_tokens());
    in.seq_lens.push_back(ctx);
    for (int32_t b = 0; b < blocks_per_seq; ++b) in.block_tables.push_back(s * blocks_per_seq + b);
  }
  if (!Check(state, be.PrepareBatch(in))) return;
  const int64_t tokens = in.num_tokens();
  auto q = be.AllocateTensor(be.activation_dtype(), tokens, kHeads * head_dim);
  auto out = be.AllocateTensor(be.activation_dtype(), tokens, kHeads * head_dim);
  if (!Check(state, q.status()) || !Check(state, out.status())) return;
  const std::vector<float> q_host = RandomFloats(tokens * kHeads * head_dim, 4);
  if (!Check(state, be.CopyToDevice(q->view.data, q_host.data(), q_host.size() * 4))) return;
  const kernels::AttentionParams params{.num_heads = kHeads,
                                        .num_kv_heads = kKvHeads,
                                        .head_dim = head_dim,
                                        .scale = 1.f / std::sqrt(static_cast<float>(head_dim))};
  const Peaks& peak = MeasuredPeaks();
  const Clock::time_point start = Clock::now();
  int32_t layer = 0;
  for (auto _ : state) {
    be.Attention(q->view, cache, layer, params, out->view);
    layer = (layer + 1) % layers;
    if (!Check(state, be.Synchronize())) return;
  }
  const double kv_bytes = 2.0 * batch * ctx * kKvHeads * head_dim *
                          static_cast<double>(kernels::DTypeSize(shape.dtype));
  const double gbs = kv_bytes * state.iterations() / SecondsSince(start) / 1e9;
  state.counters["KV_GB/s"] = gbs;
  state.counters["%copy_peak"] = 100 * gbs / peak.copy_gbs;
}

void BM_PeakCopy(benchmark::State& state) {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    ParallelCopy(dst.data(), src.data(), bytes, g_threads);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = 2.0 * bytes * state.iterations() / SecondsSince(start) / 1e9;
}

void BM_PeakInt8(benchmark::State& state) {
  constexpr int64_t kIters = 1 << 22;
  const int threads = g_threads;
  double ops = 0;
  const Clock::time_point start = Clock::now();
  for (auto _ : state) ops += Int8OnThreads(kIters, threads);
  const double gops = ops / SecondsSince(start) / 1e9;
  state.SetLabel(absl::StrCat(Int8Isa(), ", ", threads, " threads"));
  state.counters["GOP/s"] = gops;
  state.counters["GOP/s/core"] = gops / threads;
}

void BM_PeakFma(benchmark::State& state) {
  constexpr int64_t kIters = 1 << 22;
  const int threads = g_threads;
  double flops = 0;
  const Clock::time_point start = Clock::now();
  for (auto _ : state) flops += FmaOnThreads(kIters, threads);
  const double gflops = flops / SecondsSince(start) / 1e9;
  state.SetLabel(absl::StrCat(FmaIsa(), ", ", threads, " threads"));
  state.counters["GFLOP/s"] = gflops;
  state.counters["GFLOP/s/core"] = gflops / threads;
}

void RegisterAll() {
  benchmark::RegisterBenchmark("Peak/copy", BM_PeakCopy)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Peak/fma", BM_PeakFma)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Peak/int8", BM_PeakInt8)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  const kernels::DType types[] = {kernels::DType::kF32,  kernels::DType::kQ8_0,
                                  kernels::DType::kQ4_0, kernels::DType::kQ4_K,
                                  kernels::DType::kQ5_K, kernels::DType::kQ6_K};
  const int64_t shapes[][2] = {{768, 768}, {2048, 768}, {768, 2048}, {4096, 4096}};
  for (kernels::DType type : types) {
    for (const auto& nk : shapes) {
      for (int64_t m : {1, 16, 64, 512}) {
        const std::string name = absl::StrCat("MatMul/", std::string(kernels::DTypeName(type)),
                                              "/M:", m, "/N:", nk[0], "/K:", nk[1]);
        benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, type, m, nk[0], nk[1], false)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        // The layout the CPU backend serves these types in where it interleaves them.
        const kernels::DType interleaved =
            type == kernels::DType::kQ4_K   ? kernels::DType::kQ4_Kx16
            : type == kernels::DType::kQ8_0 ? kernels::DType::kQ8_0x16
            : type == kernels::DType::kQ6_K ? kernels::DType::kQ6_Kx16
                                            : type;
        if (interleaved == type || !kernels::CpuIsaActive(kernels::CpuIsa::kAvx512Vnni)) continue;
        const std::string name2 =
            absl::StrCat("MatMul/", std::string(kernels::DTypeName(interleaved)), "/M:", m,
                         "/N:", nk[0], "/K:", nk[1]);
        benchmark::RegisterBenchmark(name2.c_str(), BM_MatMul, type, m, nk[0], nk[1], true)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (int32_t hd : {64, 128}) {
    auto add = [&](int32_t batch, int32_t ctx, int32_t q_len, int32_t layers = 1,
                   kernels::DType kv = CpuBackend().kv_dtype()) {
      std::string name =
          absl::StrCat("Attention/hd:", hd, "/batch:", batch, "/ctx:", ctx, "/q:", q_len);
      if (layers > 1)
        absl::StrAppend(&name, "/layers:", layers, "/kv:", std::string(kernels::DTypeName(kv)));
      benchmark::RegisterBenchmark(name.c_str(), BM_Attention, hd, batch, ctx, q_len, layers, kv)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    };
    for (int32_t batch : {1, 16, 64}) {
      for (int32_t ctx : {512, 2048}) add(batch, ctx, 1);  // decode
    }
    add(1, 512, 512);  // prefill of a 512-token prompt
    if (hd == 64) {
      // The 76m model's decode step at 16 streams of 128 + 128 tokens: 12 layers' caches.
      for (kernels::DType kv :
           {kernels::DType::kF32, kernels::DType::kF16, kernels::DType::kBF16}) {
        add(16, 256, 1, 12, kv);
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::bench

int main(int argc, char** argv) {
  // --threads=N (ours; PAGODA_BENCH_THREADS when not given) is taken out before Google
  // Benchmark parses the rest, which refuses what it does not know. A bad count is refused.
  const auto threads = [](const char* text, const char* what) {
    int n = 0;
    if (!absl::SimpleAtoi(text, &n) || n < 1 || n > 1024) {
      std::fprintf(stderr, "pagoda-kernels-bench: %s: \"%s\" is not a thread count in [1, 1024]\n",
                   what, text);
      std::exit(2);
    }
    return n;
  };
  if (const char* env = std::getenv("PAGODA_BENCH_THREADS")) {
    pagoda::bench::g_threads = threads(env, "PAGODA_BENCH_THREADS");
  }
  // --cpu-isa=LEVEL (PAGODA_CPU_ISA when not given) caps the kernels and the peaks alike.
  const auto cpu_isa = [](const char* text, const char* what) {
    absl::StatusOr<pagoda::kernels::CpuIsa> isa = pagoda::kernels::ParseCpuIsa(text);
    absl::Status set = isa.ok() ? pagoda::kernels::SetCpuIsaCap(*isa) : isa.status();
    if (!set.ok()) {
      std::fprintf(stderr, "pagoda-kernels-bench: %s: %s\n", what,
                   std::string(set.message()).c_str());
      std::exit(2);
    }
  };
  if (const char* env = std::getenv("PAGODA_CPU_ISA")) cpu_isa(env, "PAGODA_CPU_ISA");
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      pagoda::bench::g_threads = threads(argv[i] + 10, "--threads");
    } else if (std::strncmp(argv[i], "--cpu-isa=", 10) == 0) {
      cpu_isa(argv[i] + 10, "--cpu-isa");
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::AddCustomContext("pagoda_threads", std::to_string(pagoda::bench::g_threads));
  benchmark::AddCustomContext(
      "pagoda_cpu_isa",
      absl::StrCat(
          std::string(pagoda::kernels::CpuIsaName(pagoda::kernels::ActiveCpuIsa())), " (this CPU: ",
          std::string(pagoda::kernels::CpuIsaName(pagoda::kernels::DetectedCpuIsa())), ")"));
  pagoda::bench::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const size_t ran = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (ran == 0) std::fprintf(stderr, "no benchmark matched the filter\n");
  return ran == 0 ? 1 : 0;
}
