#include "tools/sampling_flags.h"

namespace pagoda::tools {

void AddSamplingFlags(CLI::App* cmd, SamplingFlags* f) {
  cmd->add_option("--max-tokens", f->max_tokens, "tokens to generate at most");
  cmd->add_option("--temperature", f->temperature, "sampling temperature; 0 = greedy");
  cmd->add_option("--top-k", f->top_k, "keep the k most likely tokens; 0 = off");
  cmd->add_option("--top-p", f->top_p, "nucleus sampling mass in (0, 1]");
  cmd->add_option("--min-p", f->min_p, "drop tokens below min_p times the top probability");
  cmd->add_option("--repetition-penalty", f->repetition_penalty,
                  "penalty on tokens already in the context; 1 = off");
  cmd->add_option("--seed", f->seed, "sampling seed; -1 = random");
  cmd->add_option("--stop", f->stop, "stop strings, comma-separated (the flag may repeat)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--ignore-eos", f->ignore_eos, "keep generating after the end-of-sequence token");
  cmd->add_option("--parse-special", f->parse_special,
                  "prompt text that spells a special token (<|eot_id|>, <s>, ...) becomes that "
                  "token; false = plain text")
      ->default_str("true");
  cmd->add_option("--logprobs", f->logprobs,
                  "report the chosen token's logprob and the top-N; -1 = off");
}

engine::GenerationRequest RequestFromFlags(const SamplingFlags& f) {
  engine::GenerationRequest r;
  r.max_tokens = f.max_tokens;
  engine::SamplingParams& s = r.sampling;
  s.temperature = static_cast<float>(f.temperature);
  s.top_k = f.top_k;
  s.top_p = static_cast<float>(f.top_p);
  s.min_p = static_cast<float>(f.min_p);
  s.repetition_penalty = static_cast<float>(f.repetition_penalty);
  if (f.seed >= 0) s.seed = static_cast<uint64_t>(f.seed);
  if (f.logprobs >= 0) s.logprobs = f.logprobs;
  r.stop = f.stop;
  r.ignore_eos = f.ignore_eos;
  r.parse_special = f.parse_special;
  return r;
}

}  // namespace pagoda::tools
