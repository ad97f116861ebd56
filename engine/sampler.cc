#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace pagoda::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool Allows(const std::vector<uint64_t>* allowed, int32_t id) {
  if (allowed == nullptr) return true;
  const size_t word = static_cast<size_t>(id) >> 6;
  return word < allowed->size() && (((*allowed)[word] >> (id & 63)) & 1) != 0;
}

// The most likely token; with a grammar's `allowed` and no allowed logit above -inf (all
// penalized away), the first allowed token, never a refused one.
int32_t Argmax(absl::Span<const float> v, const std::vector<uint64_t>* allowed = nullptr) {
  const auto best = static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
  if (allowed == nullptr || v[best] > kNegInf) return best;
  for (int32_t id = 0; id < static_cast<int32_t>(v.size()); ++id) {
    if (Allows(allowed, id)) return id;
  }
  return best;
}

void Mask(const std::vector<uint64_t>* allowed, absl::Span<float> logits) {
  if (allowed == nullptr) return;
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (!Allows(allowed, id)) logits[id] = kNegInf;
  }
}

// log-softmax of the raw logits: the chosen token's logprob and the top-n.
TokenLogprob RawLogprobs(absl::Span<const float> logits, int32_t chosen, int32_t n) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  TokenLogprob lp;
  lp.token_id = chosen;
  lp.logprob = logits[chosen] - log_z;
  n = std::min<int32_t>(n, static_cast<int32_t>(logits.size()));
  if (n > 0) {
    std::vector<int32_t> idx(logits.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int32_t i = 0; i < n; ++i) lp.top.emplace_back(idx[i], logits[idx[i]] - log_z);
  }
  return lp;
}

void ApplyPenalties(const SampleInput& in, absl::Span<float> logits) {
  const SamplingParams& p = *in.params;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  if (p.repetition_penalty != 1.f) {
    absl::flat_hash_set<int32_t> seen(in.context.begin(), in.context.end());
    for (int32_t t : seen) {
      if (t < 0 || t >= vocab) continue;
      float& l = logits[t];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    }
  }
  if ((p.presence_penalty != 0.f || p.frequency_penalty != 0.f) && in.output_counts != nullptr) {
    for (const auto& [t, count] : *in.output_counts) {
      if (t < 0 || t >= vocab) continue;
      logits[t] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(count);
    }
  }
}

// Draws from softmax(logits / temperature) restricted by top-k, top-p and min-p. Weights
// are exp((logit - max) / temperature): never above 1 (the most likely token weighs exactly
// 1), never NaN, for any temperature > 0, however small (dividing first would overflow).
int32_t DrawFiltered(const SampleInput& in, absl::Span<float> logits) {
  const SamplingParams& p = *in.params;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  for (float& l : logits) {
    if (std::isnan(l)) l = kNegInf;  // a broken logit is never drawn
  }
  const float max = *std::max_element(logits.begin(), logits.end());
  if (!std::isfinite(max)) return Argmax(logits, in.allowed);  // nothing finite to draw from
  // Candidates sorted by logit when any filter needs an order; else all, in id order.
  std::vector<int32_t> cand(vocab);
  std::iota(cand.begin(), cand.end(), 0);
  const bool need_sort = (p.top_k > 0 && p.top_k < vocab) || p.top_p < 1.f;
  if (need_sort) {
    int32_t keep = p.top_k > 0 ? std::min(p.top_k, vocab) : vocab;
    auto by_logit = [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    };
    std::partial_sort(cand.begin(), cand.begin() + keep, cand.end(), by_logit);
    cand.resize(keep);
  }
  const double inv_t = 1.0 / static_cast<double>(p.temperature);
  std::vector<double> prob(cand.size());
  double sum = 0;
  for (size_t i = 0; i < cand.size(); ++i) {
    sum += prob[i] = std::exp((double{logits[cand[i]]} - max) * inv_t);
  }
  size_t n = cand.size();
  if (p.top_p < 1.f) {
    // Smallest prefix (by probability) whose mass reaches top_p.
    double acc = 0;
    for (size_t i = 0; i < n; ++i) {
      acc += prob[i] / sum;
      if (acc >= p.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0.f) {
    // The most likely token weighs 1, so a token's probability is below min_p times the top
    // probability exactly when its weight is below min_p; the top token always stays.
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (prob[i] >= p.min_p) {
        prob[kept] = prob[i];
        cand[kept] = cand[i];
        ++kept;
      }
    }
    n = kept;
  }
  if (n == 0) return Argmax(logits, in.allowed);
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += prob[i];
  const double target = UniformDraw(in.seed, in.output_index) * total;
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += prob[i];
    if (target < acc) return cand[i];
  }
  return cand[n - 1];
}

}  // namespace

double UniformDraw(uint64_t seed, int32_t index) {
  // splitmix64 of (seed, index): a counter-based draw, independent of call order.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(index) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

absl::Status ValidateLogitBias(absl::Span<const std::pair<int32_t, float>> bias, int32_t vocab) {
  if (bias.size() > kMaxLogitBiasEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("logit_bias: ", bias.size(), " entries; at most ", kMaxLogitBiasEntries));
  }
  absl::flat_hash_set<int32_t> seen;
  for (const auto& [id, b] : bias) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit_bias: token ", id, " is outside the vocabulary [0, ", vocab, ")"));
    }
    if (!(b >= -kMaxLogitBias && b <= kMaxLogitBias)) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit_bias: the bias of token ", id, " (", b, ") is outside [-100, 100]"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias: token ", id, " is given twice"));
    }
  }
  return absl::OkStatus();
}

TokenLogprob LogprobOf(absl::Span<const float> logits, int32_t token, int32_t top_n) {
  return RawLogprobs(logits, token, top_n);
}

SampleResult Sample(const SampleInput& in, absl::Span<float> logits) {
  const SamplingParams& p = *in.params;
  SampleResult result;
  Mask(in.allowed, logits);  // refused tokens are neither drawn nor reported as likely
  std::vector<float> raw;
  if (p.logprobs.has_value()) raw.assign(logits.begin(), logits.end());
  // Before the penalties, as llama.cpp's sampler chain and vLLM's logits processors. The ids
  // are validated; the range check keeps a bad caller from writing outside the row.
  const int32_t vocab = static_cast<int32_t>(logits.size());
  for (const auto& [id, b] : p.logit_bias) {
    if (id >= 0 && id < vocab) logits[id] += b;
  }
  ApplyPenalties(in, logits);
  // Again after the penalties: the mask is the last word (a refused token never wins,
  // whatever a penalty did to the allowed ones).
  Mask(in.allowed, logits);
  result.token_id = p.temperature == 0.f ? Argmax(logits, in.allowed) : DrawFiltered(in, logits);
  if (p.logprobs.has_value()) result.logprob = RawLogprobs(raw, result.token_id, *p.logprobs);
  return result;
}

}  // namespace pagoda::engine
