// Content spans: which bytes of a string (and of the rendered prompt) came from the
// request's messages. The engine's tokenizer parses special tokens only outside them, so
// message content never becomes <|im_start|> & co. (docs/ARCHITECTURE.md, "Chat
// templates"). Strings keep their spans through concatenation, slicing, strip/trim, join
// and the output; other operations mark their whole result as content when any input
// string had content (conservative: more plain text, never less).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "chat/budget.h"
#include "chat/value.h"

namespace pagoda::chat {

// Appends `src` shifted by `offset` to `dst`, merging a range adjacent to dst's last one.
// Precondition: src's ranges start at or after dst's end once shifted.
void AppendSpans(const Spans& src, size_t offset, Spans* dst);

// The parts of `spans` inside [begin, end), shifted to start at 0.
Spans SliceSpans(const Spans& spans, size_t begin, size_t end);

// A string value with `spans` (already relative to `s`).
Value SpannedStr(std::string s, Spans spans);

// Marks all of `v` (a string) as content; a non-string or empty string is left alone.
void MarkWhole(Value* v);

// Marks every string in `v` as content, recursively (for values built from request JSON,
// which no one else holds yet).
void MarkAllContent(Value* v);

// True when `v` is or holds (recursively) a string with content; charges a step per item
// of each list or dict walked (values nest at most max_depth deep, and never hold
// themselves).
bool HasContent(const Value& v, Budget& budget);

// True when `input` or an argument in `args` has content.
bool AnyContent(const Value& input, const CallArgs& args, Budget& budget);

// Text being rendered: the bytes and their content spans.
struct SpannedText {
  std::string text;
  Spans spans;

  // Appends plain template text.
  void Append(std::string_view plain) { text.append(plain); }
  // Appends a string value's bytes with its spans.
  void Append(const Value& string_value);
  // Appends `printed` (the text of a non-string value), all content when `content`.
  void AppendPrinted(const std::string& printed, bool content);
  // The text as a string value with its spans (leaves this empty).
  Value Take();
};

}  // namespace pagoda::chat
