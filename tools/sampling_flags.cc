#include "tools/sampling_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(int32_t, max_tokens, 128, "tokens to generate at most");
ABSL_FLAG(double, temperature, 1.0, "sampling temperature; 0 = greedy");
ABSL_FLAG(int32_t, top_k, 0, "keep the k most likely tokens; 0 = off");
ABSL_FLAG(double, top_p, 1.0, "nucleus sampling mass in (0, 1]");
ABSL_FLAG(double, min_p, 0.0, "drop tokens below min_p times the top probability");
ABSL_FLAG(double, repetition_penalty, 1.0, "penalty on tokens already in the context; 1 = off");
ABSL_FLAG(int64_t, seed, -1,
          "generate: sampling seed, -1 = random; make-model: weight seed, -1 = 0");
ABSL_FLAG(std::vector<std::string>, stop, {}, "comma-separated stop strings");
ABSL_FLAG(bool, ignore_eos, false, "keep generating after the end-of-sequence token");
ABSL_FLAG(int32_t, logprobs, -1, "report the chosen token's logprob and the top-N; -1 = off");

namespace pagoda::tools {

engine::GenerationRequest RequestFromFlags() {
  engine::GenerationRequest r;
  r.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  engine::SamplingParams& s = r.sampling;
  s.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  s.top_k = absl::GetFlag(FLAGS_top_k);
  s.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  s.min_p = static_cast<float>(absl::GetFlag(FLAGS_min_p));
  s.repetition_penalty = static_cast<float>(absl::GetFlag(FLAGS_repetition_penalty));
  if (absl::GetFlag(FLAGS_seed) >= 0) s.seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_seed));
  s.logprobs = absl::GetFlag(FLAGS_logprobs);
  r.stop = absl::GetFlag(FLAGS_stop);
  r.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  return r;
}

}  // namespace pagoda::tools
