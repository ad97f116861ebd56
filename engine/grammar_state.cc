#include "engine/grammar_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pagoda::engine {
namespace {

// The matcher's limits are what a request's grammar may cost: a client error (400), never
// a rate limit to retry.
absl::Status AsInvalid(const absl::Status& status) {
  if (status.ok() || status.code() == absl::StatusCode::kInvalidArgument) return status;
  return absl::InvalidArgumentError(status.message());
}

}  // namespace

GrammarState GrammarState::Fork() const {
  GrammarState copy;
  if (matcher != nullptr) copy.matcher = std::make_unique<grammar::Matcher>(*matcher);
  copy.cache = cache;
  return copy;
}

int64_t GrammarState::steps() const {
  return (matcher != nullptr ? matcher->steps() : 0) + (cache != nullptr ? cache->steps() : 0);
}

absl::StatusOr<GrammarState> StartGrammar(const grammar::TokenMasker& masker,
                                          std::shared_ptr<const grammar::Grammar> grammar,
                                          const grammar::MatcherLimits& limits) {
  GrammarState state;
  state.matcher = std::make_unique<grammar::Matcher>(std::move(grammar), limits);
  if (!state.matcher->ok()) return AsInvalid(state.matcher->status());
  state.cache = std::make_shared<grammar::MaskCache>(/*max_masks=*/8, /*max_states=*/1024);
  grammar::TokenBitmask mask;
  if (absl::Status s = masker.FillMask(*state.matcher, &mask, state.cache.get()); !s.ok()) {
    return AsInvalid(s);
  }
  return state;
}

absl::Status NextMask(const grammar::TokenMasker& masker, int64_t epoch, GrammarState* state,
                      grammar::TokenBitmask* mask) {
  state->cache->set_epoch(epoch);
  if (absl::Status s = masker.FillMask(*state->matcher, mask, state->cache.get()); !s.ok()) {
    return AsInvalid(s);
  }
  if (state->matcher->CanEnd() ||
      std::any_of(mask->begin(), mask->end(), [](uint64_t w) { return w != 0; })) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "grammar: no token of the vocabulary continues the output, and the grammar does not "
      "accept it as it is");
}

absl::Status AcceptToken(GrammarState* state, std::string_view bytes) {
  grammar::Matcher& m = *state->matcher;
  const int64_t before = m.steps();
  if (!m.Advance(bytes) && !m.ok()) return AsInvalid(m.status());
  m.Compact();
  // The samples' advances count toward the step's budget with their masks.
  const int64_t limit = m.limits().max_steps_per_mask;
  if (!state->cache->ChargeEpoch(m.steps() - before, limit)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grammar: max_steps_per_mask (", limit,
        ") reached by one step's masks and tokens: the grammar is too ambiguous to follow "
        "within the limit"));
  }
  return absl::OkStatus();
}

}  // namespace pagoda::engine
