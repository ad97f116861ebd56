// pagoda-kv-dtype-bench: what a smaller KV cache type costs in accuracy and buys in room.
// For each type (f32, f16, bf16, int8) one sequence per prompt runs greedily on the CPU
// backend; against f32 it prints the tokens equal until the first divergence and overall,
// and, feeding f32's tokens to every type (teacher forcing), the largest logit error and
// the argmax agreement. Then how many 2k-token sequences fit in 1 GiB per type.
//
//   pagoda-kv-dtype-bench [--model FILE] [--tokens 256]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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

  absl::StatusOr<Run> Go(const std::vector<int32_t>& prompt, int32_t steps,
                         const std::vector<int32_t>* forced) {
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
      const int32_t next =
          forced != nullptr ? (*forced)[n]
                            : static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) -
                                                   logits.begin());
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

absl::Status Main(const std::string& model_path, int32_t steps) {
  ASSIGN_OR_RETURN(auto file, model::OpenModel(model_path));
  ASSIGN_OR_RETURN(auto tokenizer, model::Tokenizer::FromGguf(*file));
  const std::vector<std::string> prompts = {"Once upon a time", "Lily and Ben went to the park",
                                            "The little dog was sad because",
                                            "One day, a big red ball"};
  const DType types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI8};
  std::vector<Run> reference;
  std::printf("%-6s %-32s %10s %10s %12s %12s\n", "kv", "prompt", "first_diff", "agree",
              "max_logit_err", "argmax_tf");
  for (DType dtype : types) {
    int64_t agree_total = 0, count_total = 0, argmax_total = 0;
    double worst = 0;
    for (size_t p = 0; p < prompts.size(); ++p) {
      const std::vector<int32_t> prompt = tokenizer->Encode(prompts[p], tokenizer->add_bos());
      const int32_t max_tokens = static_cast<int32_t>(prompt.size()) + steps + 1;
      ASSIGN_OR_RETURN(auto runner, Runner::Create(*file, dtype, max_tokens));
      ASSIGN_OR_RETURN(Run free, runner->Go(prompt, steps, nullptr));
      if (dtype == DType::kF32) {
        reference.push_back(free);
        continue;
      }
      const Run& ref = reference[p];
      ASSIGN_OR_RETURN(auto forced_runner, Runner::Create(*file, dtype, max_tokens));
      ASSIGN_OR_RETURN(Run forced, forced_runner->Go(prompt, steps, &ref.tokens));
      int32_t first_diff = -1, agree = 0, argmax_same = 0;
      double err = 0;
      for (int32_t i = 0; i < steps; ++i) {
        const size_t t = prompt.size() + i;
        if (free.tokens[t] == ref.tokens[t]) {
          ++agree;
        } else if (first_diff < 0) {
          first_diff = i;
        }
        for (size_t v = 0; v < forced.logits[i].size(); ++v) {
          err = std::max(err, std::fabs(double{forced.logits[i][v]} - ref.logits[i][v]));
        }
        argmax_same += Argmax(forced.logits[i]) == Argmax(ref.logits[i]);
      }
      std::printf("%-6s %-32s %10s %9.1f%% %12.3g %11.1f%%\n",
                  std::string(kernels::DTypeName(dtype)).c_str(), prompts[p].c_str(),
                  first_diff < 0 ? "none" : std::to_string(first_diff).c_str(),
                  100.0 * agree / steps, err, 100.0 * argmax_same / steps);
      agree_total += agree;
      count_total += steps;
      argmax_total += argmax_same;
      worst = std::max(worst, err);
    }
    if (dtype != DType::kF32) {
      std::printf("%-6s %-32s %10s %9.1f%% %12.3g %11.1f%%\n",
                  std::string(kernels::DTypeName(dtype)).c_str(), "(all prompts)", "",
                  100.0 * agree_total / count_total, worst, 100.0 * argmax_total / count_total);
    }
  }
  // Room: 2k-token sequences in 1 GiB for this model and for the 1b and 8b presets' shapes.
  struct Shape {
    std::string name;
    int32_t layers, kv_heads, head_dim;
  };
  ASSIGN_OR_RETURN(auto config, model::LlamaConfig::FromGguf(*file));
  const std::vector<Shape> shapes = {
      {"this model", config.num_layers, config.num_kv_heads, config.head_dim},
      {"Llama-3.2-1B shape", 16, 8, 64},
      {"Llama-3.1-8B shape", 32, 8, 128}};
  std::printf("\n%-20s %-6s %14s %22s\n", "model", "kv", "bytes/token", "2k-token seqs in 1 GiB");
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
      std::printf("%-20s %-6s %14.0f %22lld\n", s.name.c_str(),
                  std::string(kernels::DTypeName(dtype)).c_str(), per_token,
                  static_cast<long long>(blocks / (2048 / kBlockSize)));
    }
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
  app.add_option("--tokens", tokens, "greedy tokens per prompt")->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);
  const absl::Status s = pagoda::Main(model, tokens);
  if (!s.ok()) {
    std::fprintf(stderr, "pagoda-kv-dtype-bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
