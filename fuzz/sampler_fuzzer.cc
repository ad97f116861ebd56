// Fuzzes the sampler: SamplingParams (any float, NaN and infinities included, beyond what
// the engine's validator lets through), logits with NaN and infinities, repetition context
// and output counts with out-of-vocabulary ids, logit bias with any id and float. The token is
// always a vocabulary id; with logprobs its entry names that token and at most min(logprobs, vocab)
// others.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/sampler.h"
#include "fuzz/fuzz_data.h"

namespace {

using pagoda::fuzz::Check;

// Consumes fixed-size values from the front of the input; zeros once it runs out.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T Next() {
    T v{};
    const size_t n = std::min(sizeof(T), size_);
    std::memcpy(&v, data_, n);
    data_ += n;
    size_ -= n;
    return v;
  }
  size_t left() const { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  pagoda::engine::SamplingParams p;
  p.temperature = in.Next<float>();
  p.top_k = in.Next<int32_t>();
  p.top_p = in.Next<float>();
  p.min_p = in.Next<float>();
  p.repetition_penalty = in.Next<float>();
  p.presence_penalty = in.Next<float>();
  p.frequency_penalty = in.Next<float>();
  const int8_t logprobs = in.Next<int8_t>();
  if (logprobs != -1) p.logprobs = logprobs;  // -1 leaves it unset; other negatives are set
  const uint64_t seed = in.Next<uint64_t>();
  const int32_t output_index = in.Next<int32_t>();
  const int vocab = 1 + in.Next<uint8_t>() % 128;
  std::vector<int32_t> context(in.Next<uint8_t>() % 16);
  for (int32_t& t : context) t = in.Next<int16_t>() % (vocab + 2);
  absl::flat_hash_map<int32_t, int32_t> counts;
  for (int i = in.Next<uint8_t>() % 8; i > 0; --i) {
    counts[in.Next<int16_t>() % (vocab + 2)] = in.Next<int32_t>();
  }
  std::vector<float> logits(vocab);
  for (float& l : logits) l = in.Next<float>();
  // Logit bias last (older corpus entries stay meaningful): ids out of the vocabulary and
  // any float, beyond what ValidateLogitBias lets through.
  for (int i = in.Next<uint8_t>() % 4; i > 0; --i) {
    const int32_t id = in.Next<int16_t>() % (vocab + 2);
    p.logit_bias.emplace_back(id, in.Next<float>());
  }

  pagoda::engine::SampleInput sample_in{.params = &p,
                                        .seed = seed,
                                        .output_index = output_index,
                                        .context = context,
                                        .output_counts = &counts};
  const pagoda::engine::SampleResult r = pagoda::engine::Sample(sample_in, absl::MakeSpan(logits));
  Check(r.token_id >= 0 && r.token_id < vocab, "token id outside the vocabulary");
  Check(r.logprob.has_value() == p.logprobs.has_value(), "logprob presence differs from request");
  if (r.logprob.has_value()) {
    Check(r.logprob->token_id == r.token_id, "logprob names another token");
    Check(static_cast<int>(r.logprob->top.size()) <= std::clamp<int>(*p.logprobs, 0, vocab),
          "too many top logprobs");
    for (const auto& [id, lp] : r.logprob->top) Check(id >= 0 && id < vocab, "top id out of range");
  }
  return 0;
}
