#include "chat/spans.h"

#include <algorithm>
#include <utility>

namespace pagoda::chat {

void AppendSpans(const Spans& src, size_t offset, Spans* dst) {
  for (const Span& s : src) {
    const Span shifted{s.begin + offset, s.end + offset};
    if (shifted.begin >= shifted.end) continue;
    if (!dst->empty() && dst->back().end >= shifted.begin) {
      dst->back().end = std::max(dst->back().end, shifted.end);
    } else {
      dst->push_back(shifted);
    }
  }
}

Spans SliceSpans(const Spans& spans, size_t begin, size_t end) {
  Spans out;
  for (const Span& s : spans) {
    const size_t b = std::max(s.begin, begin);
    const size_t e = std::min(s.end, end);
    if (b < e) out.push_back({b - begin, e - begin});
  }
  return out;
}

Value SpannedStr(std::string s, Spans spans) {
  Value v = Value::Str(std::move(s));
  v.spans = std::move(spans);
  return v;
}

void MarkWhole(Value* v) {
  if (!v->IsString()) return;
  v->spans.clear();
  if (!v->s.empty()) v->spans = Spans{{0, v->s.size()}};
}

void MarkAllContent(Value* v) {
  if (v->IsString()) {
    MarkWhole(v);
  } else if (v->IsArray()) {
    for (Value& item : *v->array) MarkAllContent(&item);
  } else if (v->IsObject()) {
    for (auto& [key, item] : *v->object) MarkAllContent(&item);
  }
}

bool HasContent(const Value& v, Budget& budget) {
  if (v.IsString()) return !v.spans.empty();
  if (v.IsArray()) {
    budget.Steps(v.array->size());
    for (const Value& item : *v.array) {
      if (HasContent(item, budget)) return true;
    }
  } else if (v.IsObject()) {
    budget.Steps(v.object->size());
    for (const auto& [key, item] : *v.object) {
      if (HasContent(item, budget)) return true;
    }
  }
  return false;
}

bool AnyContent(const Value& input, const CallArgs& args, Budget& budget) {
  if (HasContent(input, budget)) return true;
  for (const Value& v : args.positional) {
    if (HasContent(v, budget)) return true;
  }
  for (const auto& [key, v] : args.keyword) {
    if (HasContent(v, budget)) return true;
  }
  return false;
}

void SpannedText::Append(const Value& string_value) {
  AppendSpans(string_value.spans, text.size(), &spans);
  text.append(string_value.s);
}

void SpannedText::AppendPrinted(const std::string& printed, bool content) {
  if (content) AppendSpans({{0, printed.size()}}, text.size(), &spans);
  text.append(printed);
}

Value SpannedText::Take() {
  Value v = SpannedStr(std::move(text), std::move(spans));
  text.clear();
  spans.clear();
  return v;
}

}  // namespace pagoda::chat
