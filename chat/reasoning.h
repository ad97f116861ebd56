// Reasoning output (docs/API.md "Reasoning"): models that think before they answer write
// their reasoning between two markers ("<think>" ... "</think>": DeepSeek-R1, Qwen3, QwQ;
// "[THINK]" ... "[/THINK]": Magistral). The parser, chosen by --reasoning-parser or from
// the chat template, splits an output into its reasoning and its content (the answer,
// where tool calls are then looked for), whole or as it streams.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pagoda::chat {

struct ReasoningFormat {
  std::string name;   // "deepseek_r1", "qwen3", "mistral"
  std::string open;   // the marker that opens the reasoning
  std::string close;  // the marker that closes it
  // The output is reasoning from its first byte even without `open` (DeepSeek-R1, whose
  // template writes the open marker into the prompt): everything before `close` is
  // reasoning. Otherwise an output is reasoning only when it (or the prompt) opens it.
  bool starts_open = false;
};

// --reasoning-parser NAME: "none" (std::nullopt), "deepseek_r1", "qwen3" (QwQ too) or
// "mistral". "auto" is the caller's (DetectReasoningFormat). InvalidArgument naming the
// known parsers for any other name.
absl::StatusOr<std::optional<ReasoningFormat>> ReasoningFormatNamed(std::string_view name);

// The format a chat template's model writes: "<think>" and "</think>" in the template give
// deepseek_r1 for DeepSeek's templates ("<｜Assistant｜>"), qwen3 for the others; "[THINK]"
// gives mistral; else none.
std::optional<ReasoningFormat> DetectReasoningFormat(std::string_view template_source);

struct ReasoningSplit {
  std::string reasoning;       // between the markers (absent markers: "")
  std::string content;         // the rest: the answer
  bool has_reasoning = false;  // the output opened a reasoning section
};

// The whole `output`, which starts inside the reasoning when `open_at_start` (the prompt
// opened it: engine GenerationOutput::reasoning_open) or the format starts_open, or when it
// begins (after whitespace) with the open marker. Reasoning runs to the close marker, or to
// the end of an output that never closes it. Markers are in neither part.
ReasoningSplit SplitReasoning(std::string_view output, const ReasoningFormat& format,
                              bool open_at_start);

// One output's reasoning split as it streams: the deltas of reasoning and content
// concatenate to SplitReasoning's parts for the whole output. Text that may still be a
// marker is held back until it is known.
class ReasoningStreamParser {
 public:
  ReasoningStreamParser(ReasoningFormat format, bool open_at_start);

  struct Delta {
    std::string reasoning;
    std::string content;
  };
  // Takes the next piece of the output (any split).
  Delta Feed(std::string_view piece);
  // The output has ended: everything still held back.
  Delta Finish();
  // The output opened a reasoning section (so far).
  bool has_reasoning() const { return phase_ != Phase::kStart && phase_ != Phase::kPlain; }

 private:
  enum class Phase {
    kStart,      // nothing decided: the output may open the reasoning
    kReasoning,  // inside it
    kAnswer,     // past the close marker
    kPlain,      // never opened: all content
  };
  Delta Scan(bool at_end);

  ReasoningFormat format_;
  Phase phase_;
  std::string pending_;  // held back
};

}  // namespace pagoda::chat
