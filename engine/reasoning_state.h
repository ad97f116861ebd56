// A sample's place in its output's reasoning section (GenerationRequest::reasoning): before
// it (the output may still open it), inside it (counting its tokens against the budget,
// then forcing the close marker), or past it (where a sampling grammar applies). Markers
// are found in the output's bytes, however the model spelled them in tokens; a forced
// close marker is the vocabulary's tokenization of its text. Internal to engine/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/request.h"
#include "model/tokenizer.h"

namespace pagoda::engine {

// The markers' longest text; longer ones are refused.
inline constexpr size_t kMaxReasoningMarkerBytes = 64;

class ReasoningState {
 public:
  enum class Phase {
    kOff,      // the request has no reasoning section
    kMayOpen,  // the output has not begun: it may start with the open marker
    kInside,   // the output is reasoning
    kClosed,   // past the close marker (or never opened): the answer
  };

  ReasoningState() = default;

  // The state of a request's samples before they sample: inside the reasoning when
  // `spec.starts_open` or the text of `prompt` ends with the open marker (whitespace after
  // it aside). With `has_grammar` an output that does not start inside is
  // closed from its first token (the grammar constrains all of it). InvalidArgument naming
  // "reasoning" for markers that are empty, too long or not valid UTF-8, or a negative
  // budget.
  static absl::StatusOr<ReasoningState> Start(const model::Tokenizer& tok,
                                              const ReasoningSpec& spec,
                                              absl::Span<const int32_t> prompt, bool has_grammar);

  Phase phase() const { return phase_; }
  // The prompt opened the reasoning (GenerationOutput::reasoning_open).
  bool open_at_start() const { return open_at_start_; }
  // The sampling grammar waits while the output may still be, or is, reasoning.
  bool grammar_waits() const { return phase_ == Phase::kMayOpen || phase_ == Phase::kInside; }
  // The token the next sample must be (the close marker, forced once the budget is spent),
  // or -1.
  int32_t Forced() const;
  // Takes the token just sampled: the bytes it adds to the output.
  void Observe(std::string_view bytes);

 private:
  struct Markers {
    std::string open;
    std::string close;
    std::vector<int32_t> close_ids;  // forced once the budget is spent
  };
  // Inside: the reasoning text seen since it opened (its last bytes only) grew by `bytes`.
  void TakeReasoning(std::string_view bytes);
  // Once `spent_` reaches the budget, the close marker is forced.
  void MaybeForce();

  Phase phase_ = Phase::kOff;
  std::shared_ptr<const Markers> markers_;
  std::optional<int32_t> budget_;
  bool open_at_start_ = false;
  std::string seen_;      // kMayOpen: the output so far; kInside: its last bytes
  int32_t spent_ = 0;     // kInside: reasoning tokens sampled (forced ones aside)
  int32_t forcing_ = -1;  // kInside: index into close_ids of the next forced token
};

}  // namespace pagoda::engine
