#include "chat/tool_call_scan.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "nlohmann/json.hpp"

namespace pagoda::chat::internal {
namespace {

// Ordered, so the arguments keep the key order the model wrote.
using Json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view Trim(std::string_view s) { return TrimRight(TrimLeft(s)); }

// `end` moved back over the whitespace before it.
size_t BackOverSpace(std::string_view text, size_t end) {
  while (end > 0 && IsSpace(text[end - 1])) --end;
  return end;
}

// The length of the longest end of `text` that is a proper prefix of `marker` (text that
// may become the marker when more arrives).
size_t PartialMarker(std::string_view text, std::string_view marker) {
  for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k) {
    if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

std::optional<Json> ParseJson(std::string_view text) {
  Json value = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

std::string Compact(const Json& value) {
  // Invalid UTF-8 in a string the model wrote is replaced rather than thrown on.
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A call object: a non-empty string "name" and an object under `primary`, else under
// `secondary` (neither present: no arguments, "{}").
std::optional<ScannedCall> CallFromObject(const Json& obj, std::string_view primary,
                                          std::string_view secondary, const OfferedTools* offered) {
  if (!obj.is_object()) return std::nullopt;
  const auto name = obj.find("name");
  if (name == obj.end() || !name->is_string() || name->get<std::string>().empty()) {
    return std::nullopt;
  }
  if (offered != nullptr && !offered->contains(name->get<std::string>())) return std::nullopt;
  ScannedCall call{name->get<std::string>(), "{}"};
  for (const std::string_view key : {primary, secondary}) {
    const auto args = obj.find(std::string(key));
    if (args == obj.end()) continue;
    if (!args->is_object()) return std::nullopt;
    call.arguments = Compact(*args);
    break;
  }
  return call;
}

std::optional<ScannedCall> CallFromText(std::string_view text, std::string_view primary,
                                        std::string_view secondary, const OfferedTools* offered) {
  const std::optional<Json> obj = ParseJson(Trim(text));
  if (!obj) return std::nullopt;
  return CallFromObject(*obj, primary, secondary, offered);
}

// Appends a run of text outside calls: its whitespace next to a call is not content.
void AppendContent(std::string_view text, bool before_call, ScannedRegion* out) {
  if (out->after_call) text = TrimLeft(text);
  if (before_call) text = TrimRight(text);
  if (text.empty()) return;
  out->content.append(text);
  out->after_call = false;
}

// The end of the JSON value starting at text[start] ('{' or '['), by bracket depth outside
// strings (not a validation: the parse that follows is); npos when it does not end in text.
size_t JsonExtent(std::string_view text, size_t start) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

size_t SkipSpace(std::string_view text, size_t pos) {
  while (pos < text.size() && IsSpace(text[pos])) ++pos;
  return pos;
}

// Where a `<tool_call>` block at `open` ends. Its body is the JSON object after the tag when
// that object is followed by `</tool_call>` (so a "</tool_call>" inside one of its strings
// does not cut it), else the text up to the first `</tool_call>`; unclosed, the rest of the
// output. `resolved` is false while more text could still change the answer.
struct HermesBlock {
  bool resolved = false;
  size_t body_end = 0;
  size_t block_end = 0;
};

HermesBlock FindHermesBlock(std::string_view text, size_t open, bool at_end) {
  const size_t body = open + kHermesOpen.size();
  const size_t p = SkipSpace(text, body);
  if (p < text.size() && text[p] == '{') {
    const size_t e = JsonExtent(text, p);
    if (e != std::string_view::npos) {
      const size_t q = SkipSpace(text, e);
      const std::string_view rest = text.substr(q);
      if (rest.substr(0, kHermesClose.size()) == kHermesClose) {
        return HermesBlock{true, e, q + kHermesClose.size()};
      }
      if (!at_end && kHermesClose.substr(0, rest.size()) == rest) return HermesBlock{};
    } else if (!at_end) {
      return HermesBlock{};
    }
  } else if (p == text.size() && !at_end) {
    return HermesBlock{};
  }
  const size_t close = text.find(kHermesClose, body);
  if (close != std::string_view::npos) {
    return HermesBlock{true, close, close + kHermesClose.size()};
  }
  if (!at_end) return HermesBlock{};
  // Unclosed at the end of the output: a call if the rest parses (a model stopped by EOS
  // right after the JSON).
  return HermesBlock{true, text.size(), text.size()};
}

size_t HermesSettled(std::string_view text) {
  size_t pos = 0, end = 0;
  while (true) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string_view::npos) {
      end = text.size() - PartialMarker(text.substr(pos), kHermesOpen);
      break;
    }
    const HermesBlock block = FindHermesBlock(text, open, /*at_end=*/false);
    if (!block.resolved) {
      end = open;
      break;
    }
    pos = block.block_end;
  }
  return BackOverSpace(text, end);
}

ScannedRegion ScanHermes(std::string_view region, bool after_call, bool at_end,
                         const OfferedTools* offered) {
  ScannedRegion out;
  out.after_call = after_call;
  size_t segment = 0, pos = 0;
  while (true) {
    const size_t open = region.find(kHermesOpen, pos);
    if (open == std::string_view::npos) break;
    const HermesBlock block = FindHermesBlock(region, open, at_end);
    if (!block.resolved) break;  // SettledLength never hands over one before the end
    const size_t body = open + kHermesOpen.size();
    if (auto call = CallFromText(region.substr(body, block.body_end - body), "arguments",
                                 "parameters", offered)) {
      AppendContent(region.substr(segment, open - segment), /*before_call=*/true, &out);
      out.calls.push_back(*std::move(call));
      out.after_call = true;
      segment = block.block_end;
    }
    pos = block.block_end;
  }
  AppendContent(region.substr(segment), /*before_call=*/false, &out);
  return out;
}

size_t LlamaSettled(std::string_view text, bool at_start) {
  if (!at_start) return text.size();
  const std::string_view t = TrimLeft(text);
  if (t.empty()) return 0;
  const bool may_be_call = t.front() == '{' || t.substr(0, kPythonTag.size()) == kPythonTag ||
                           kPythonTag.substr(0, t.size()) == t;
  // An output that may be a call is held whole: it is a call only if all of it parses.
  return may_be_call ? 0 : text.size();
}

ScannedRegion ScanLlama(std::string_view region, bool at_start, bool at_end,
                        const OfferedTools* offered) {
  ScannedRegion out;
  if (at_start && at_end) {
    std::string_view t = Trim(region);
    if (t.substr(0, kPythonTag.size()) == kPythonTag) t = t.substr(kPythonTag.size());
    if (auto call = CallFromText(t, "parameters", "arguments", offered)) {
      out.calls.push_back(*std::move(call));
      out.after_call = true;
      return out;
    }
  }
  out.content = std::string(region);
  return out;
}

// `name[ARGS]{...}` calls separated by further markers (Mistral's v11 tokenizer form).
std::optional<std::vector<ScannedCall>> MistralNamedCalls(std::string_view rest,
                                                          const OfferedTools* offered) {
  std::vector<ScannedCall> calls;
  while (true) {
    const size_t next = rest.find(kMistralMarker);
    const std::string_view part = rest.substr(0, next);
    const size_t args = part.find(kMistralArgs);
    if (args == std::string_view::npos) return std::nullopt;
    const std::string_view name = Trim(part.substr(0, args));
    const std::optional<Json> obj = ParseJson(Trim(part.substr(args + kMistralArgs.size())));
    if (name.empty() || !obj || !obj->is_object()) return std::nullopt;
    if (offered != nullptr && !offered->contains(std::string(name))) return std::nullopt;
    calls.push_back(ScannedCall{std::string(name), Compact(*obj)});
    if (next == std::string_view::npos) return calls;
    rest = rest.substr(next + kMistralMarker.size());
  }
}

std::optional<std::vector<ScannedCall>> MistralCalls(std::string_view rest,
                                                     const OfferedTools* offered) {
  const std::string_view t = Trim(rest);
  if (t.empty() || t.front() != '[') return MistralNamedCalls(rest, offered);
  const std::optional<Json> array = ParseJson(t);
  if (!array || !array->is_array() || array->empty()) return std::nullopt;
  std::vector<ScannedCall> calls;
  for (const Json& item : *array) {
    auto call = CallFromObject(item, "arguments", "parameters", offered);
    if (!call) return std::nullopt;
    calls.push_back(*std::move(call));
  }
  return calls;
}

size_t MistralSettled(std::string_view text) {
  const size_t marker = text.find(kMistralMarker);
  const size_t end =
      marker != std::string_view::npos ? marker : text.size() - PartialMarker(text, kMistralMarker);
  return BackOverSpace(text, end);
}

ScannedRegion ScanMistral(std::string_view region, bool at_end, const OfferedTools* offered) {
  ScannedRegion out;
  const size_t marker = region.find(kMistralMarker);
  // The calls run to the end of the output: SettledLength holds the marker until then.
  if (marker != std::string_view::npos && at_end) {
    if (auto calls = MistralCalls(region.substr(marker + kMistralMarker.size()), offered)) {
      AppendContent(region.substr(0, marker), /*before_call=*/true, &out);
      out.calls = *std::move(calls);
      out.after_call = true;
      return out;
    }
  }
  out.content = std::string(region);
  return out;
}

}  // namespace

size_t SettledLength(ToolCallFormat format, std::string_view text, bool at_start) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return HermesSettled(text);
    case ToolCallFormat::kLlama3Json:
      return LlamaSettled(text, at_start);
    case ToolCallFormat::kMistral:
      return MistralSettled(text);
    case ToolCallFormat::kNone:
      break;
  }
  return text.size();
}

ScannedRegion ScanRegion(ToolCallFormat format, std::string_view region, bool at_start,
                         bool after_call, bool at_end, const OfferedTools* offered) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return ScanHermes(region, after_call, at_end, offered);
    case ToolCallFormat::kLlama3Json:
      return ScanLlama(region, at_start, at_end, offered);
    case ToolCallFormat::kMistral:
      return ScanMistral(region, at_end, offered);
    case ToolCallFormat::kNone:
      break;
  }
  ScannedRegion out;
  out.content = std::string(region);
  return out;
}

}  // namespace pagoda::chat::internal
