// A request's constrained-decoding state (request.sampling.grammar): its matcher and the
// mask cache its samples share. Started at intake, on the submitting thread, so the
// grammar's start state and first mask (the costliest part of a new grammar) are never
// the engine thread's work; from there each token's mask is bounded by MatcherLimits.
// Internal to engine/.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace pagoda::engine {

struct GrammarState {
  // Each sample's own: the output's parse state, advanced with every sampled token.
  std::unique_ptr<grammar::Matcher> matcher;
  // Shared by the samples of one request (the masks depend on the state alone).
  std::shared_ptr<grammar::MaskCache> cache;

  // A copy for another sample of the same request, at the same state.
  GrammarState Fork() const;
  // Expansion steps spent on this request's grammar so far (its start and its masks).
  int64_t steps() const;
};

// The start state of `grammar` with its first mask computed into a new cache.
// InvalidArgument naming the limit when the start or the first mask goes over `limits`.
absl::StatusOr<GrammarState> StartGrammar(const grammar::TokenMasker& masker,
                                          std::shared_ptr<const grammar::Grammar> grammar,
                                          const grammar::MatcherLimits& limits);

// Fills `mask` with the tokens `state` allows next; the masks of one `epoch` (an engine
// step) of one request share one MatcherLimits::max_steps_per_mask. InvalidArgument when
// the grammar goes over its limits, or allows no token at all while the output is not a
// whole sentence of it: no token of this vocabulary continues the output, and a "stop"
// would return text the grammar has not accepted. OK with an empty mask when the output is
// whole but the vocabulary has no end-of-generation token to end it with (a stop).
absl::Status NextMask(const grammar::TokenMasker& masker, int64_t epoch, GrammarState* state,
                      grammar::TokenBitmask* mask);

// Advances `state` past the bytes of the sampled token (which its mask allowed), counted
// in the epoch's budget with the masks. InvalidArgument when a byte goes over the matcher's
// limits (the sample's own stacks may be larger than the mask's shared states), or the
// epoch's steps go over max_steps_per_mask.
absl::Status AcceptToken(GrammarState* state, std::string_view bytes);

}  // namespace pagoda::engine
