// paged_attention_bench: decode-attention bandwidth of the CUDA kernels against the
// device's own copy bandwidth.
//
// For each batch x context (GQA 32:4, head_dim 128, bf16 activations, a bf16 or fp8 e4m3
// cache, block_size 16, shuffled block tables) it times LaunchPagedAttention with CUDA
// events, averaged over many iterations after a warm-up, and counts bytes as K/V read (at
// the cache's element size) + Q read + output written. The copy
// bandwidth is a device-to-device cudaMemcpy counted as bytes read + written. It prints the
// split-KV partition the plan picks ("-" = no split) and the same run with splitting off.
//
// Usage: paged_attention_bench [--batches=1,16,64,128] [--contexts=512,2048,8192]
//                              [--iters=50] [--kv_dtype=bf16|fp8] [--json=PATH]
//                              [--partitions=256,512,1024]
// --json also writes the table (and the copy bandwidth) as JSON to PATH. --partitions also
// times each shape with each of these split-KV partition sizes (tokens), one line each: the
// data for tuning the plan's choice (ChooseSplitPartition).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/bench_args.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/paged_attention.cuh"

namespace {

using pagoda::kernels::BatchInput;
using pagoda::kernels::DType;
namespace cuda = pagoda::kernels::cuda;

constexpr int kHeads = 32;
constexpr int kKvHeads = 4;
constexpr int kHeadDim = 128;
constexpr int kBlockSize = 16;
constexpr int kElem = 2;  // bf16: q, out and a bf16 cache

#define CHECK_CUDA(expr)                                                 \
  do {                                                                   \
    const cudaError_t err_ = (expr);                                     \
    if (err_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, \
                   cudaGetErrorString(err_));                            \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

struct Args {
  std::vector<int> batches = {1, 16, 64, 128};
  std::vector<int> contexts = {512, 2048, 8192};
  int iters = 50;
  std::vector<int> partitions;    // split-KV partition sizes to sweep (none by default)
  std::string kv_dtype = "bf16";  // the cache's element type: bf16 or fp8 (e4m3)
  std::string json;               // where the table goes as JSON ("" = nowhere)
};

// One row of the table.
struct Row {
  int batch = 0;
  int context = 0;
  int32_t partition = 0;  // split-KV partition the plan picked, 0 = none
  double us = 0, gbs = 0, nosplit_us = 0, nosplit_gbs = 0;
};

// Parses the command line into `a` (CLI11, as every pagoda binary: bench/bench_args.h).
// Returns the exit code when the program should stop (0 after --help, 2 on a bad flag).
std::optional<int> ParseArgs(int argc, char** argv, Args* a) {
  CLI::App app("paged_attention_bench: CUDA paged-attention decode bandwidth",
               "paged_attention_bench");
  pagoda::bench::SetUpApp(&app);
  app.add_option("--batches", a->batches, "Comma-separated batch sizes.")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--contexts", a->contexts, "Comma-separated context lengths.")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--iters", a->iters, "Timed iterations per shape.")->check(CLI::Range(1, 100000));
  app.add_option("--kv-dtype", a->kv_dtype, "KV cache element type.")
      ->check(CLI::IsMember({"bf16", "fp8"}));
  app.add_option("--json", a->json, "Write the table as JSON here.");
  app.add_option("--partitions", a->partitions, "Also time each shape with these partitions.")
      ->delimiter(',')
      ->check(CLI::Range(16, 1 << 20));
  return pagoda::bench::ParseCommandLine(&app, argc, argv);
}

// Device memory filled with pseudo-random bf16 values in about [-1, 1): a random host chunk
// tiled with device-to-device copies.
void* RandomDeviceBf16(size_t elems, std::mt19937& rng) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, elems * kElem));
  const size_t chunk = std::min<size_t>(elems, size_t{1} << 22);
  std::vector<uint16_t> host(chunk);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (uint16_t& h : host) {
    const float f = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    h = static_cast<uint16_t>(bits >> 16);
  }
  CHECK_CUDA(cudaMemcpy(p, host.data(), chunk * kElem, cudaMemcpyHostToDevice));
  for (size_t at = chunk; at < elems; at += chunk) {
    const size_t n = std::min(chunk, elems - at);
    CHECK_CUDA(
        cudaMemcpy(static_cast<char*>(p) + at * kElem, p, n * kElem, cudaMemcpyDeviceToDevice));
  }
  return p;
}

// Device memory of `elems` random e4m3 values of magnitude below 2 (bit 6 clear: exponent
// at most 7, never NaN), tiled as above.
void* RandomDeviceFp8(size_t elems, std::mt19937& rng) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, elems));
  const size_t chunk = std::min<size_t>(elems, size_t{1} << 22);
  std::vector<uint8_t> host(chunk);
  for (uint8_t& b : host) b = static_cast<uint8_t>(rng() & 0xbf);
  CHECK_CUDA(cudaMemcpy(p, host.data(), chunk, cudaMemcpyHostToDevice));
  for (size_t at = chunk; at < elems; at += chunk) {
    const size_t n = std::min(chunk, elems - at);
    CHECK_CUDA(cudaMemcpy(static_cast<char*>(p) + at, p, n, cudaMemcpyDeviceToDevice));
  }
  return p;
}

// Milliseconds `iters` calls of `launch` take on `stream` (CUDA events), after `warmup`
// untimed calls.
template <typename Launch>
float ElapsedMs(cudaStream_t stream, int warmup, int iters, Launch launch) {
  for (int i = 0; i < warmup; ++i) launch();
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) launch();
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

// Device-to-device copy bandwidth in GB/s (bytes read + written).
double CopyBandwidth(cudaStream_t stream) {
  const size_t bytes = size_t{1} << 30;
  void* a = nullptr;
  void* b = nullptr;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  constexpr int kIters = 20;
  const float ms = ElapsedMs(stream, 3, kIters, [&] {
    CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes * kIters / (ms * 1e-3) / 1e9;
}

// One decode batch: every sequence has `context` tokens, its blocks shuffled over the pool.
BatchInput MakeBatch(int batch, int context, int num_blocks, std::mt19937& rng) {
  std::vector<int32_t> pool(num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  const int per_seq = (context + kBlockSize - 1) / kBlockSize;
  BatchInput b;
  b.max_blocks_per_seq = per_seq;
  b.query_start_loc = {0};
  for (int s = 0; s < batch; ++s) {
    const int32_t* table = pool.data() + s * per_seq;
    b.block_tables.insert(b.block_tables.end(), table, table + per_seq);
    const int pos = context - 1;
    b.token_ids.push_back(0);
    b.positions.push_back(pos);
    b.slot_mapping.push_back(table[pos / kBlockSize] * kBlockSize + pos % kBlockSize);
    b.query_start_loc.push_back(s + 1);
    b.seq_lens.push_back(context);
  }
  return b;
}

template <typename T>
T* Upload(const std::vector<T>& v) {
  T* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(1, v.size()) * sizeof(T)));
  if (!v.empty()) CHECK_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

struct Timing {
  double us = 0;
  int32_t partition = 0;
};

// Average time of one attention launch for `batch` under the plan `split` produces.
Timing TimeAttention(const BatchInput& batch, cuda::PagedAttentionParams p, int num_blocks,
                     int num_sms, int split, int iters, cudaStream_t stream) {
  cuda::AttentionPlanOptions o;
  o.path = cuda::AttentionPath::kTensorCore;
  o.num_heads = kHeads;
  o.num_kv_heads = kKvHeads;
  o.num_blocks = num_blocks;
  o.block_size = kBlockSize;
  o.num_sms = num_sms;
  o.split_partition = split;
  auto plan = cuda::BuildAttentionPlan(batch, o);
  if (!plan.ok()) {
    std::fprintf(stderr, "plan: %s\n", std::string(plan.status().message()).c_str());
    std::exit(1);
  }
  p.items = Upload(plan->items);
  p.splits = Upload(plan->splits);
  p.num_items = static_cast<int32_t>(plan->items.size());
  p.num_splits = static_cast<int32_t>(plan->splits.size());
  float* partials = nullptr;
  const size_t rows = static_cast<size_t>(std::max(plan->num_partials, 1)) * kHeads;
  CHECK_CUDA(cudaMalloc(&partials, rows * (kHeadDim + 2) * sizeof(float)));
  p.partial_out = partials;
  p.partial_ml = partials + rows * kHeadDim;
  const float ms =
      ElapsedMs(stream, 5, iters, [&] { CHECK_CUDA(cuda::LaunchPagedAttention(p, stream)); });
  cudaFree(const_cast<cuda::AttentionItem*>(p.items));
  cudaFree(const_cast<cuda::SplitToken*>(p.splits));
  cudaFree(partials);
  return {ms * 1e3 / iters, plan->partition_size};
}

// Writes the table to `path` as JSON; false (with a message) when the file cannot be written.
bool WriteJson(const std::string& path, const cudaDeviceProp& prop, double copy_gbs,
               const std::string& kv_dtype, const std::vector<Row>& rows) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  std::string name = prop.name;
  std::replace(name.begin(), name.end(), '"', '\'');
  std::fprintf(f,
               "{\n  \"device\": \"%s\",\n  \"sms\": %d,\n  \"copy_gbs\": %.1f,\n"
               "  \"shape\": {\"q_heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, "
               "\"dtype\": \"bf16\", \"kv_dtype\": \"%s\", \"block_size\": %d},\n  \"rows\": [",
               name.c_str(), prop.multiProcessorCount, copy_gbs, kHeads, kKvHeads, kHeadDim,
               kv_dtype.c_str(), kBlockSize);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "%s\n    {\"batch\": %d, \"context\": %d, \"split\": %d, \"time_us\": %.2f, "
                 "\"gbs\": %.1f, \"pct_copy\": %.1f, \"nosplit_us\": %.2f, "
                 "\"nosplit_gbs\": %.1f, \"nosplit_pct_copy\": %.1f}",
                 i == 0 ? "" : ",", r.batch, r.context, r.partition, r.us, r.gbs,
                 100 * r.gbs / copy_gbs, r.nosplit_us, r.nosplit_gbs,
                 100 * r.nosplit_gbs / copy_gbs);
  }
  std::fprintf(f, "\n  ]\n}\n");
  return std::fclose(f) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (auto rc = ParseArgs(argc, argv, &args)) return *rc;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "paged_attention_bench: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  const double copy_gbs = CopyBandwidth(stream);
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  std::printf("device-to-device copy bandwidth: %.0f GB/s (read + write)\n", copy_gbs);
  const bool fp8 = args.kv_dtype == "fp8";
  const int kv_elem = fp8 ? 1 : kElem;
  std::printf(
      "decode attention: %d q heads, %d kv heads, head_dim %d, bf16, %s cache, block_size %d\n",
      kHeads, kKvHeads, kHeadDim, args.kv_dtype.c_str(), kBlockSize);
  std::printf("%6s %8s %7s %10s %8s %7s | %10s %8s %7s\n", "batch", "context", "split", "time_us",
              "GB/s", "%copy", "nosplit_us", "GB/s", "%copy");
  std::mt19937 rng(42);
  std::vector<Row> rows;
  for (int context : args.contexts) {
    for (int batch : args.batches) {
      const int per_seq = (context + kBlockSize - 1) / kBlockSize;
      const int num_blocks = batch * per_seq;
      const size_t plane = static_cast<size_t>(num_blocks) * kBlockSize * kKvHeads * kHeadDim;
      void* k = fp8 ? RandomDeviceFp8(plane, rng) : RandomDeviceBf16(plane, rng);
      void* v = fp8 ? RandomDeviceFp8(plane, rng) : RandomDeviceBf16(plane, rng);
      void* q = RandomDeviceBf16(static_cast<size_t>(batch) * kHeads * kHeadDim, rng);
      void* out = RandomDeviceBf16(static_cast<size_t>(batch) * kHeads * kHeadDim, rng);
      const BatchInput b = MakeBatch(batch, context, num_blocks, rng);
      cuda::PagedAttentionParams p;
      p.q = q;
      p.out = out;
      p.k_cache = k;
      p.v_cache = v;
      int32_t* tables = Upload(b.block_tables);
      int32_t* positions = Upload(b.positions);
      p.block_tables = tables;
      p.positions = positions;
      p.dtype = DType::kBF16;
      p.kv_dtype = fp8 ? DType::kF8E4M3 : DType::kBF16;
      p.kv_scale = 1.f;
      p.path = cuda::AttentionPath::kTensorCore;
      p.q_stride = kHeads * kHeadDim;
      p.out_stride = kHeads * kHeadDim;
      p.num_heads = kHeads;
      p.num_kv_heads = kKvHeads;
      p.head_dim = kHeadDim;
      p.log2_block_size = 4;
      p.max_blocks_per_seq = b.max_blocks_per_seq;
      p.scale_log2 = 1.4426950408889634f / 11.313708f;
      const double bytes = 2.0 * batch * context * kKvHeads * kHeadDim * kv_elem +
                           2.0 * batch * kHeads * kHeadDim * kElem;
      const Timing auto_split =
          TimeAttention(b, p, num_blocks, prop.multiProcessorCount, -1, args.iters, stream);
      const Timing no_split =
          TimeAttention(b, p, num_blocks, prop.multiProcessorCount, 0, args.iters, stream);
      const double gbs = bytes / (auto_split.us * 1e-6) / 1e9;
      const double gbs0 = bytes / (no_split.us * 1e-6) / 1e9;
      const std::string split =
          auto_split.partition == 0 ? "-" : std::to_string(auto_split.partition);
      std::printf("%6d %8d %7s %10.1f %8.0f %6.0f%% | %10.1f %8.0f %6.0f%%\n", batch, context,
                  split.c_str(), auto_split.us, gbs, 100 * gbs / copy_gbs, no_split.us, gbs0,
                  100 * gbs0 / copy_gbs);
      std::fflush(stdout);
      rows.push_back({batch, context, auto_split.partition, auto_split.us, gbs, no_split.us, gbs0});
      for (int partition : args.partitions) {
        const Timing t = TimeAttention(b, p, num_blocks, prop.multiProcessorCount, partition,
                                       args.iters, stream);
        const double g = bytes / (t.us * 1e-6) / 1e9;
        std::printf("%6d %8d %7d %10.1f %8.0f %6.0f%%   (partition sweep)\n", batch, context,
                    t.partition, t.us, g, 100 * g / copy_gbs);
      }
      std::fflush(stdout);
      for (void* ptr : {k, v, q, out, static_cast<void*>(tables), static_cast<void*>(positions)}) {
        cudaFree(ptr);
      }
    }
  }
  std::printf("target: >= 80%% of copy bandwidth at batch 64, context 2048\n");
  if (!args.json.empty() && !WriteJson(args.json, prop, copy_gbs, args.kv_dtype, rows)) return 1;
  return 0;
}
