// pagoda-kv-dtype-bench: what a smaller KV cache type costs in accuracy and buys in room.
// The f32 run of each prompt is the reference; the bench prints its near ties (the smallest
// gap between the top two logits, and how many steps have one under 0.1). For each other type
// (f16, bf16, int8) one sequence per prompt runs greedily on the CPU backend; per prompt and
// over all prompts it prints the index of the first token differing from f32 (= steps when
// none) as a share of the steps ("until_1st"), the share of positions with the same token
// ("overall"), and, feeding f32's tokens to every type (teacher forcing), the largest logit
// error and the argmax agreement; gap@1st is f32's top-two gap where the run first differs. Then
// how many 2k-token sequences fit in 1 GiB per type, for this model and for the Llama-3.2-1B and
// Llama-3.1-8B shapes (layers, KV heads, head_dim).
//
// Last, the quality table llama-perplexity --kl-divergence would give (KlTable below): mean
// KL divergence, top-1 agreement and perplexity ratio against f32, with decode tok/s.
//
//   pagoda-kv-dtype-bench [--model FILE] [--tokens 256] [--kl-tokens 2048] [--kl-ctx 512]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/backend.h"
#include "kernels/batch.h"
#include "kernels/kv_cache.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "model/make_model.h"
#include "model/tokenizer.h"

namespace pagoda {
namespace {

using kernels::DType;

constexpr int32_t kBlockSize = 16;

struct Run {
  std::vector<int32_t> tokens;             // prompt then output
  std::vector<std::vector<float>> logits;  // one row per output position
};

// One sequence on a cache of `dtype`. Without `forced`, greedy from `prompt` for `steps`
// tokens; with it, feeds forced (prompt + output) and records the logits at each output
// position.
class Runner {
 public:
  static absl::StatusOr<std::unique_ptr<Runner>> Create(const gguf::GgufFile& file, DType dtype,
                                                        int32_t max_tokens) {
    std::unique_ptr<Runner> r(new Runner);
    ASSIGN_OR_RETURN(r->backend_, kernels::CreateBackend(
                                      {.device = kernels::DeviceKind::kCpu, .num_threads = 2}));
    ASSIGN_OR_RETURN(r->model_, model::LlamaModel::Load(file, r->backend_.get()));
    const model::LlamaConfig& c = r->model_->config();
    r->shape_ = {.num_layers = c.num_layers,
                 .num_blocks = (max_tokens + kBlockSize - 1) / kBlockSize,
                 .block_size = kBlockSize,
                 .num_kv_heads = c.num_kv_heads,
                 .head_dim = c.head_dim,
                 .dtype = dtype};
    ASSIGN_OR_RETURN(r->buffer_, r->backend_->Allocate(r->shape_.total_bytes()));
    return r;
  }

  // With `sample` (and no `forced`), tokens are drawn from softmax(logits) (temperature 1).
  absl::StatusOr<Run> Go(const std::vector<int32_t>& prompt, int32_t steps,
                         const std::vector<int32_t>* forced, std::mt19937_64* sample = nullptr) {
    Run run;
    run.tokens = prompt;
    const int32_t vocab = model_->config().vocab_size;
    std::vector<float> logits(vocab);
    int32_t computed = 0;
    const int32_t total = static_cast<int32_t>(prompt.size()) + steps;
    while (static_cast<int32_t>(run.tokens.size()) < total) {
      kernels::BatchInput b;
      const int32_t n = static_cast<int32_t>(run.tokens.size());
      for (int32_t t = computed; t < n; ++t) {
        b.token_ids.push_back(run.tokens[t]);
        b.positions.push_back(t);
        b.slot_mapping.push_back(t);  // blocks 0, 1, ... in order
      }
      b.query_start_loc = {0, n - computed};
      b.seq_lens = {n};
      b.max_blocks_per_seq = shape_.num_blocks;
      for (int32_t i = 0; i < shape_.num_blocks; ++i) b.block_tables.push_back(i);
      b.logits_indices = {n - computed - 1};
      RETURN_IF_ERROR(model_->Forward(b, {buffer_.data(), shape_}, logits.data()));
      computed = n;
      run.logits.push_back(logits);
      int32_t next;
      if (forced != nullptr) {
        next = (*forced)[n];
      } else if (sample != nullptr) {
        const float top = *std::max_element(logits.begin(), logits.end());
        std::vector<double> w(logits.size());
        for (size_t v = 0; v < w.size(); ++v) w[v] = std::exp(double{logits[v]} - top);
        next = std::discrete_distribution<int32_t>(w.begin(), w.end())(*sample);
      } else {
        next =
            static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      }
      run.tokens.push_back(next);
    }
    return run;
  }

 private:
  Runner() = default;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<model::LlamaModel> model_;
  kernels::KvCacheShape shape_;
  kernels::DeviceBuffer buffer_;
};

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Near ties of a run: the smallest gap between the best and the second-best logit, where,
// and at how many positions the gap is under 0.1 (a logit error that size can flip them).
struct Ties {
  double smallest = HUGE_VAL;
  int32_t at = -1, under_tenth = 0;
};
Ties NearTies(const Run& run) {
  Ties ties;
  for (size_t i = 0; i < run.logits.size(); ++i) {
    std::vector<float> v = run.logits[i];
    std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
    const double gap = double{v[0]} - v[1];
    ties.under_tenth += gap < 0.1;
    if (gap < ties.smallest) ties.smallest = gap, ties.at = static_cast<int32_t>(i);
  }
  return ties;
}

// Sums over prompts for one type.
struct Totals {
  int64_t until_first = 0, agree = 0, argmax_same = 0, count = 0;
  double worst = 0;
};

// Runs `dtype` on every prompt against `reference` (f32's runs) and prints a row per prompt.
absl::Status Compare(const gguf::GgufFile& file, DType dtype, const std::string& label,
                     const std::vector<std::vector<int32_t>>& prompts,
                     const std::vector<std::string>& names, const std::vector<Run>& reference,
                     int32_t steps, Totals* totals) {
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<int32_t>& prompt = prompts[p];
    const int32_t max_tokens = static_cast<int32_t>(prompt.size()) + steps + 1;
    ASSIGN_OR_RETURN(auto runner, Runner::Create(file, dtype, max_tokens));
    ASSIGN_OR_RETURN(Run free, runner->Go(prompt, steps, nullptr));
    const Run& ref = reference[p];
    ASSIGN_OR_RETURN(auto forced_runner, Runner::Create(file, dtype, max_tokens));
    ASSIGN_OR_RETURN(Run forced, forced_runner->Go(prompt, steps, &ref.tokens));
    int32_t first_diff = steps, agree = 0, argmax_same = 0;
    double err = 0;
    for (int32_t i = 0; i < steps; ++i) {
      const size_t t = prompt.size() + i;
      if (free.tokens[t] == ref.tokens[t]) {
        ++agree;
      } else if (first_diff == steps) {
        first_diff = i;
      }
      for (size_t v = 0; v < forced.logits[i].size(); ++v) {
        err = std::max(err, std::fabs(double{forced.logits[i][v]} - ref.logits[i][v]));
      }
      argmax_same += Argmax(forced.logits[i]) == Argmax(ref.logits[i]);
    }
    std::string gap = "-";
    if (first_diff < steps) {
      std::vector<float> v = ref.logits[first_diff];
      std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
      gap = absl::StrFormat("%.4f", double{v[0]} - v[1]);
    }
    std::printf("%-6s %-32s %6d %9.1f%% %9.1f%% %9.3g %9.1f%% %9s\n", label.c_str(),
                names[p].c_str(), first_diff, 100.0 * first_diff / steps, 100.0 * agree / steps,
                err, 100.0 * argmax_same / steps, gap.c_str());
    totals->until_first += first_diff;
    totals->agree += agree;
    totals->argmax_same += argmax_same;
    totals->count += steps;
    totals->worst = std::max(totals->worst, err);
  }
  std::printf("%-6s %-32s %6s %9.1f%% %9.1f%% %9.3g %9.1f%%\n", label.c_str(), "(all prompts)", "",
              100.0 * totals->until_first / totals->count, 100.0 * totals->agree / totals->count,
              totals->worst, 100.0 * totals->argmax_same / totals->count);
  return absl::OkStatus();
}

// log softmax of `v` in double.
std::vector<double> LogSoftmax(const std::vector<float>& v) {
  const double top = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (float x : v) sum += std::exp(double{x} - top);
  const double log_sum = top + std::log(sum);
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = double{v[i]} - log_sum;
  return out;
}

// What llama-perplexity --kl-divergence measures, per KV type against f32 on one text:
// teacher-forced (every type is fed the text's tokens, one decode step at a time, so that
// attention reads each earlier token back from the cache), the mean KL divergence
// KL(p_f32 || p_type) of the next-token distributions, how often the top-1 tokens agree,
// and the perplexity of the text under each type as a ratio to f32's. The text is the f32
// model's own sample at temperature 1 (seeded), in chunks of `ctx` tokens each starting at
// BOS, so it works for a random model as for a trained one; every position of a chunk is
// scored. Decode tok/s is the forced pass's rate: one sequence, its context growing to ctx.
absl::Status KlTable(const gguf::GgufFile& file, int32_t bos, int32_t text_tokens, int32_t ctx) {
  const int32_t chunks = (text_tokens + ctx - 2) / (ctx - 1);
  const DType types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI8};
  struct Quality {
    double kl = 0, nll = 0, seconds = 0;
    int64_t top1 = 0, count = 0;
  };
  Quality q[4];
  std::mt19937_64 rng(20261202);
  for (int32_t c = 0; c < chunks; ++c) {
    ASSIGN_OR_RETURN(auto ref_runner, Runner::Create(file, DType::kF32, ctx + 1));
    ASSIGN_OR_RETURN(Run ref, ref_runner->Go({bos}, ctx - 1, nullptr, &rng));
    std::vector<std::vector<double>> ref_log;
    for (const auto& l : ref.logits) ref_log.push_back(LogSoftmax(l));
    for (int t = 0; t < 4; ++t) {
      ASSIGN_OR_RETURN(auto runner, Runner::Create(file, types[t], ctx + 1));
      const auto start = std::chrono::steady_clock::now();
      ASSIGN_OR_RETURN(Run forced, runner->Go({bos}, ctx - 1, &ref.tokens));
      q[t].seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      for (size_t i = 0; i < forced.logits.size(); ++i) {
        const std::vector<double> lp = LogSoftmax(forced.logits[i]);
        double kl = 0;
        for (size_t v = 0; v < lp.size(); ++v) {
          kl += std::exp(ref_log[i][v]) * (ref_log[i][v] - lp[v]);
        }
        q[t].kl += kl;
        q[t].nll -= lp[ref.tokens[i + 1]];
        q[t].top1 += Argmax(forced.logits[i]) == Argmax(ref.logits[i]);
        ++q[t].count;
      }
    }
  }
  std::printf(
      "\nteacher-forced against f32 over %lld tokens (%d chunks of %d from BOS, the f32 model's "
      "own sample at temperature 1)\n%-6s %12s %10s %10s %10s %12s\n",
      static_cast<long long>(q[0].count), chunks, ctx, "kv", "mean KL", "top-1", "PPL", "PPL ratio",
      "decode tok/s");
  const double ppl_f32 = std::exp(q[0].nll / q[0].count);
  for (int t = 0; t < 4; ++t) {
    const double ppl = std::exp(q[t].nll / q[t].count);
    std::printf("%-6s %12.3e %9.3f%% %10.4f %10.6f %12.1f\n",
                std::string(kernels::DTypeName(types[t])).c_str(), q[t].kl / q[t].count,
                100.0 * q[t].top1 / q[t].count, ppl, ppl / ppl_f32, q[t].count / q[t].seconds);
  }
  return absl::OkStatus();
}

absl::Status Main(const std::string& model_path, int32_t steps, int32_t kl_tokens, int32_t kl_ctx) {
  ASSIGN_OR_RETURN(auto file, model::OpenModel(model_path));
  ASSIGN_OR_RETURN(auto tokenizer, model::Tokenizer::FromGguf(*file));
  const std::vector<std::string> names = {"Once upon a time",
                                          "Lily and Ben went to the park",
                                          "The little dog was sad because",
                                          "One day, a big red ball",
                                          "Tom had a toy car",
                                          "The sun was shining and",
                                          "Mom said to Sue",
                                          "There was a little bird"};
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& n : names) prompts.push_back(tokenizer->Encode(n, tokenizer->add_bos()));
  const DType types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI8};
  // f32 runs: the reference, and how close its choices are (the smallest top-2 logit gap).
  std::vector<Run> reference;
  std::printf(
      "f32 reference over %d steps: smallest gap between the top two logits, and steps\n"
      "with a gap under 0.1\n",
      steps);
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int32_t max_tokens = static_cast<int32_t>(prompts[p].size()) + steps + 1;
    ASSIGN_OR_RETURN(auto runner, Runner::Create(*file, DType::kF32, max_tokens));
    ASSIGN_OR_RETURN(Run run, runner->Go(prompts[p], steps, nullptr));
    const Ties ties = NearTies(run);
    std::printf("  %-32s %.4f at step %3d, %3d steps under 0.1\n", names[p].c_str(), ties.smallest,
                ties.at, ties.under_tenth);
    reference.push_back(std::move(run));
  }
  std::printf("\n%-6s %-32s %6s %10s %10s %9s %10s %9s\n", "kv", "prompt", "first", "until_1st",
              "overall", "max_err", "argmax_tf", "gap@1st");
  for (DType dtype : types) {
    if (dtype == DType::kF32) continue;
    Totals totals;
    RETURN_IF_ERROR(Compare(*file, dtype, std::string(kernels::DTypeName(dtype)), prompts, names,
                            reference, steps, &totals));
  }
  // Room: 2k-token sequences in 1 GiB for this model and for the 1B and 8B shapes (layers x KV
  // heads x head_dim), 16-token blocks, parameters of int8 included.
  struct Shape {
    std::string name;
    int32_t layers, kv_heads, head_dim;
  };
  ASSIGN_OR_RETURN(auto config, model::LlamaConfig::FromGguf(*file));
  const std::vector<Shape> shapes = {
      {"this model", config.num_layers, config.num_kv_heads, config.head_dim},
      {"Llama-3.2-1B 16x8x64", 16, 8, 64},
      {"Llama-3.1-8B 32x8x128", 32, 8, 128}};
  std::printf("\n%-22s %-6s %14s %22s\n", "model", "kv", "bytes/token", "2k-token seqs in 1 GiB");
  for (const Shape& s : shapes) {
    for (DType dtype : types) {
      const kernels::KvCacheShape k{.num_layers = s.layers,
                                    .num_blocks = 1,
                                    .block_size = kBlockSize,
                                    .num_kv_heads = s.kv_heads,
                                    .head_dim = s.head_dim,
                                    .dtype = dtype};
      const double per_token = static_cast<double>(k.bytes_per_block()) / kBlockSize;
      const int64_t blocks = (int64_t{1} << 30) / static_cast<int64_t>(k.bytes_per_block());
      std::printf("%-22s %-6s %14.0f %22lld\n", s.name.c_str(),
                  std::string(kernels::DTypeName(dtype)).c_str(), per_token,
                  static_cast<long long>(blocks / (2048 / kBlockSize)));
    }
  }
  if (kl_tokens > 0) {
    const std::vector<int32_t> start = tokenizer->Encode("", /*add_bos=*/true);
    const int32_t bos = start.empty() ? 0 : start.front();  // no BOS: token 0 opens each chunk
    RETURN_IF_ERROR(KlTable(*file, bos, kl_tokens, kl_ctx));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace pagoda

int main(int argc, char** argv) {
  CLI::App app{"pagoda-kv-dtype-bench: accuracy and room of each KV cache type"};
  std::string model;
  int32_t tokens = 256;
  app.add_option("--model", model, "GGUF model; empty = the built-in stories260K");
  int32_t kl_tokens = 2048, kl_ctx = 512;
  app.add_option("--tokens", tokens, "greedy tokens per prompt")->check(CLI::Range(1, 4096));
  app.add_option("--kl-tokens", kl_tokens,
                 "tokens of text for the teacher-forced KL/top-1/perplexity table (0 = skip)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--kl-ctx", kl_ctx, "tokens per chunk of that text, from BOS")
      ->check(CLI::Range(2, 1 << 16));
  CLI11_PARSE(app, argc, argv);
  const absl::Status s = pagoda::Main(model, tokens, kl_tokens, kl_ctx);
  if (!s.ok()) {
    std::fprintf(stderr, "pagoda-kv-dtype-bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
