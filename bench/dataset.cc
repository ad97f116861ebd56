#include "bench/dataset.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pagoda::bench {
namespace {

std::vector<int32_t> RandomTokens(int n, int vocab_size, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> id(kFirstRandomTokenId, vocab_size - 1);
  std::vector<int32_t> tokens(std::max(n, 0));
  for (int32_t& t : tokens) t = id(rng);
  return tokens;
}

// Uniform over the integers in [floor(len * (1 - r)), ceil(len * (1 + r))], at least 1.
int DrawLength(int len, double range_ratio, std::mt19937_64& rng) {
  const int lo = std::max(1, static_cast<int>(std::floor(len * (1.0 - range_ratio))));
  const int hi = std::max(lo, static_cast<int>(std::ceil(len * (1.0 + range_ratio))));
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

absl::StatusOr<BenchRequest> ParseLine(const std::string& line, int line_number,
                                       int default_max_tokens, const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", why));
  };
  if (!j.is_object()) return bad("not a JSON object");
  if (!j.contains("prompt") || !j["prompt"].is_string()) return bad("no string \"prompt\"");
  BenchRequest request;
  request.prompt = j["prompt"].get<std::string>();
  request.max_tokens = default_max_tokens;
  if (j.contains("max_tokens")) {
    if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1) {
      return bad("\"max_tokens\" is not a positive integer");
    }
    request.max_tokens = j["max_tokens"].get<int>();
  }
  return request;
}

}  // namespace

std::vector<BenchRequest> MakeRandomDataset(const RandomDatasetOptions& options,
                                            std::mt19937_64& rng) {
  const std::vector<int32_t> prefix = RandomTokens(options.prefix_len, options.vocab_size, rng);
  std::vector<BenchRequest> requests(std::max(options.num_prompts, 0));
  for (BenchRequest& r : requests) {
    const int input_len = DrawLength(options.input_len, options.range_ratio, rng);
    r.max_tokens = DrawLength(options.output_len, options.range_ratio, rng);
    r.prompt_token_ids = prefix;
    const std::vector<int32_t> own = RandomTokens(input_len, options.vocab_size, rng);
    r.prompt_token_ids.insert(r.prompt_token_ids.end(), own.begin(), own.end());
  }
  return requests;
}

std::vector<BenchRequest> MakeSharedPrefixDataset(const SharedPrefixOptions& options,
                                                  std::mt19937_64& rng) {
  std::vector<std::vector<int32_t>> prefixes;
  for (int g = 0; g < options.num_groups; ++g) {
    prefixes.push_back(RandomTokens(options.prefix_len, options.vocab_size, rng));
  }
  std::vector<BenchRequest> requests(std::max(options.num_prompts, 0));
  for (size_t i = 0; i < requests.size(); ++i) {
    BenchRequest& r = requests[i];
    r.prompt_token_ids = prefixes[i % prefixes.size()];
    const std::vector<int32_t> own = RandomTokens(options.suffix_len, options.vocab_size, rng);
    r.prompt_token_ids.insert(r.prompt_token_ids.end(), own.begin(), own.end());
    r.max_tokens = options.output_len;
  }
  return requests;
}

absl::StatusOr<std::vector<BenchRequest>> LoadJsonlDataset(const std::string& path, int num_prompts,
                                                           int default_max_tokens) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --dataset-path ", path));
  std::vector<BenchRequest> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    absl::StatusOr<BenchRequest> request = ParseLine(line, number, default_max_tokens, path);
    if (!request.ok()) return request.status();
    lines.push_back(*std::move(request));
  }
  if (lines.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " has no prompts"));
  std::vector<BenchRequest> requests;
  for (int i = 0; i < num_prompts; ++i) requests.push_back(lines[i % lines.size()]);
  return requests;
}

}  // namespace pagoda::bench
