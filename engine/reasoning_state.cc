#include "engine/reasoning_state.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "model/utf8.h"

namespace pagoda::engine {
namespace {

absl::Status Invalid(const char* field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status CheckMarker(const std::string& marker, const char* field) {
  if (marker.empty()) return Invalid(field, "must not be empty");
  if (marker.size() > kMaxReasoningMarkerBytes) {
    return Invalid(
        field, absl::StrCat("has ", marker.size(), " bytes; at most ", kMaxReasoningMarkerBytes));
  }
  if (!model::IsValidUtf8(marker)) return Invalid(field, "is not valid UTF-8");
  return absl::OkStatus();
}

std::string_view StripLeadingSpace(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  return s;
}

std::string_view StripTrailingSpace(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

absl::StatusOr<ReasoningState> ReasoningState::Start(const model::Tokenizer& tok,
                                                     const ReasoningSpec& spec,
                                                     absl::Span<const int32_t> prompt,
                                                     bool has_grammar) {
  ReasoningState s;
  if (spec.open.empty() && spec.close.empty()) return s;
  if (absl::Status st = CheckMarker(spec.open, "reasoning.open"); !st.ok()) return st;
  if (absl::Status st = CheckMarker(spec.close, "reasoning.close"); !st.ok()) return st;
  if (spec.max_tokens.has_value() && *spec.max_tokens < 0) {
    return Invalid("reasoning.max_tokens", "must be >= 0");
  }
  auto markers = std::make_shared<Markers>();
  markers->open = spec.open;
  markers->close = spec.close;
  markers->close_ids = tok.Encode(spec.close, /*add_bos=*/false, /*parse_special=*/true);
  if (markers->close_ids.empty()) return Invalid("reasoning.close", "has no tokens");
  // The prompt's last bytes: enough tokens for the marker and some whitespace after it.
  std::string tail;
  for (size_t n = prompt.size(); n > 0 && tail.size() < spec.open.size() + 64; --n) {
    tail.insert(0, tok.TokenBytes(prompt[n - 1]));
  }
  const bool prompt_opens = StripTrailingSpace(tail).ends_with(spec.open);
  s.markers_ = std::move(markers);
  s.budget_ = spec.max_tokens;
  if (spec.starts_open || prompt_opens) {
    s.phase_ = Phase::kInside;
    s.open_at_start_ = true;
    s.MaybeForce();
  } else {
    s.phase_ = has_grammar ? Phase::kClosed : Phase::kMayOpen;
  }
  return s;
}

int32_t ReasoningState::Forced() const {
  if (phase_ != Phase::kInside || forcing_ < 0) return -1;
  return markers_->close_ids[static_cast<size_t>(forcing_)];
}

void ReasoningState::MaybeForce() {
  if (budget_.has_value() && spent_ >= *budget_ && forcing_ < 0) forcing_ = 0;
}

void ReasoningState::TakeReasoning(std::string_view bytes) {
  seen_.append(bytes);
  if (seen_.find(markers_->close) != std::string::npos) {
    phase_ = Phase::kClosed;
    seen_.clear();
    return;
  }
  // Only a close marker's worth of bytes can matter for the next token.
  if (seen_.size() > markers_->close.size()) seen_.erase(0, seen_.size() - markers_->close.size());
}

void ReasoningState::Observe(std::string_view bytes) {
  switch (phase_) {
    case Phase::kOff:
    case Phase::kClosed:
      return;
    case Phase::kMayOpen: {
      seen_.append(bytes);
      const std::string_view head = StripLeadingSpace(seen_);
      if (head.starts_with(markers_->open)) {
        const std::string after(head.substr(markers_->open.size()));
        phase_ = Phase::kInside;
        seen_.clear();
        TakeReasoning(after);
        if (phase_ == Phase::kInside) MaybeForce();
      } else if (!std::string_view(markers_->open).starts_with(head)) {
        phase_ = Phase::kClosed;
        seen_.clear();
      }
      return;
    }
    case Phase::kInside:
      if (forcing_ >= 0) {
        if (++forcing_ == static_cast<int32_t>(markers_->close_ids.size())) {
          phase_ = Phase::kClosed;
          seen_.clear();
        }
        return;
      }
      TakeReasoning(bytes);
      if (phase_ != Phase::kInside) return;
      ++spent_;
      MaybeForce();
      return;
  }
}

}  // namespace pagoda::engine
