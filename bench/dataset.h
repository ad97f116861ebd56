// The prompts a benchmark sends: random token ids, groups sharing a long prefix, or a
// JSONL file of text prompts.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pagoda::bench {

struct BenchRequest {
  std::string prompt;                     // a text prompt (file dataset) ...
  std::vector<int32_t> prompt_token_ids;  // ... or token ids (the generated datasets)
  int max_tokens = 0;                     // 0 = leave unset
};

// Random ids avoid the special tokens at the start of the vocabulary.
inline constexpr int32_t kFirstRandomTokenId = 3;

struct RandomDatasetOptions {
  int num_prompts = 0;
  int input_len = 0;       // tokens after the shared prefix
  int output_len = 0;      // max_tokens
  double range_ratio = 0;  // lengths uniform in [len * (1 - r), len * (1 + r)], r in [0, 1)
  int prefix_len = 0;      // random tokens shared by every prompt, before each own part
  int vocab_size = 0;      // ids are drawn from [kFirstRandomTokenId, vocab_size)
};

// vLLM's "random" dataset: every length is drawn uniformly from the integers in
// [floor(len * (1 - r)), ceil(len * (1 + r))], at least 1. Precondition: vocab_size > 3.
std::vector<BenchRequest> MakeRandomDataset(const RandomDatasetOptions& options,
                                            std::mt19937_64& rng);

struct SharedPrefixOptions {
  int num_prompts = 0;
  int num_groups = 1;  // request i belongs to group i % num_groups
  int prefix_len = 0;  // random tokens shared within a group
  int suffix_len = 0;  // random tokens of each request's own
  int output_len = 0;  // max_tokens
  int vocab_size = 0;
};

// Groups of requests sharing a long prefix (prefix-cache workloads). Precondition:
// num_groups >= 1, vocab_size > 3.
std::vector<BenchRequest> MakeSharedPrefixDataset(const SharedPrefixOptions& options,
                                                  std::mt19937_64& rng);

// `num_prompts` requests from a JSONL file of {"prompt": str, "max_tokens": int} lines
// (max_tokens optional: `default_max_tokens` then), in file order, starting over at the
// top when the file has fewer. Blank lines are skipped. NotFound when the file cannot be
// read, InvalidArgument (with the line number) for a malformed line or an empty file.
absl::StatusOr<std::vector<BenchRequest>> LoadJsonlDataset(const std::string& path, int num_prompts,
                                                           int default_max_tokens);

}  // namespace pagoda::bench
