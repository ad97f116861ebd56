#include "chat/reasoning.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pagoda::chat {
namespace {

ReasoningFormat Think(std::string name, bool starts_open) {
  return {
      .name = std::move(name), .open = "<think>", .close = "</think>", .starts_open = starts_open};
}

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The length of the longest proper prefix of `marker` that `text` ends with.
size_t HeldMarkerPrefix(std::string_view text, std::string_view marker) {
  for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k) {
    if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::optional<ReasoningFormat>> ReasoningFormatNamed(std::string_view name) {
  if (name == "none") return std::nullopt;
  if (name == "deepseek_r1") return Think("deepseek_r1", /*starts_open=*/true);
  if (name == "qwen3" || name == "qwq") return Think("qwen3", /*starts_open=*/false);
  if (name == "mistral") {
    return ReasoningFormat{.name = "mistral", .open = "[THINK]", .close = "[/THINK]"};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("reasoning parser '", std::string(name),
                   "' is not known; use auto, none, deepseek_r1, qwen3 or mistral"));
}

std::optional<ReasoningFormat> DetectReasoningFormat(std::string_view source) {
  const bool think = source.find("<think>") != std::string_view::npos &&
                     source.find("</think>") != std::string_view::npos;
  if (think) {
    const bool deepseek =
        source.find(
            "<\xEF\xBD\x9C"
            "Assistant\xEF\xBD\x9C>") != std::string_view::npos;  // "<｜Assistant｜>"
    return Think(deepseek ? "deepseek_r1" : "qwen3", deepseek);
  }
  if (source.find("[THINK]") != std::string_view::npos) return *ReasoningFormatNamed("mistral");
  return std::nullopt;
}

ReasoningSplit SplitReasoning(std::string_view output, const ReasoningFormat& format,
                              bool open_at_start) {
  ReasoningStreamParser parser(format, open_at_start);
  ReasoningStreamParser::Delta a = parser.Feed(output);
  ReasoningStreamParser::Delta b = parser.Finish();
  return {.reasoning = a.reasoning + b.reasoning,
          .content = a.content + b.content,
          .has_reasoning = parser.has_reasoning()};
}

ReasoningStreamParser::ReasoningStreamParser(ReasoningFormat format, bool open_at_start)
    : format_(std::move(format)), phase_(Phase::kStart) {
  format_.starts_open = format_.starts_open || open_at_start;
}

ReasoningStreamParser::Delta ReasoningStreamParser::Feed(std::string_view piece) {
  pending_.append(piece);
  return Scan(/*at_end=*/false);
}

ReasoningStreamParser::Delta ReasoningStreamParser::Finish() { return Scan(/*at_end=*/true); }

ReasoningStreamParser::Delta ReasoningStreamParser::Scan(bool at_end) {
  Delta d;
  while (true) {
    switch (phase_) {
      case Phase::kStart: {
        // Leading whitespace, then the open marker (written by the model; one the prompt
        // ends with is not repeated, but is dropped when the model writes it anyway).
        const size_t ws = static_cast<size_t>(
            std::find_if_not(pending_.begin(), pending_.end(), IsSpace) - pending_.begin());
        const std::string_view rest = std::string_view(pending_).substr(ws);
        if (rest.starts_with(format_.open)) {
          pending_.erase(0, ws + format_.open.size());
          phase_ = Phase::kReasoning;
          continue;
        }
        if (!at_end && std::string_view(format_.open).starts_with(rest)) return d;
        phase_ = format_.starts_open ? Phase::kReasoning : Phase::kPlain;
        continue;
      }
      case Phase::kPlain:
      case Phase::kAnswer:
        d.content += pending_;
        pending_.clear();
        return d;
      case Phase::kReasoning: {
        const size_t close = pending_.find(format_.close);
        if (close != std::string::npos) {
          d.reasoning.append(pending_, 0, close);
          pending_.erase(0, close + format_.close.size());
          phase_ = Phase::kAnswer;
          continue;
        }
        const size_t keep = at_end ? 0 : HeldMarkerPrefix(pending_, format_.close);
        d.reasoning.append(pending_, 0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return d;
      }
    }
  }
}

}  // namespace pagoda::chat
