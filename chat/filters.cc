// Jinja filters: `value | name(args)`.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "chat/builtins.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

using K = Value::Kind;

// The [begin, end) of `s` that StripText keeps; charges the scan and the kept bytes.
std::pair<size_t, size_t> StripRange(const std::string& s, const Value& chars, bool left,
                                     bool right, Budget& budget) {
  const std::string set = chars.IsString() ? chars.s : std::string(" \t\n\r\f\v");
  budget.Scan(s.size() + set.size());
  bool in_set[256] = {};
  for (unsigned char c : set) in_set[c] = true;
  size_t begin = 0, end = s.size();
  while (left && begin < end && in_set[static_cast<unsigned char>(s[begin])]) ++begin;
  while (right && end > begin && in_set[static_cast<unsigned char>(s[end - 1])]) --end;
  budget.Bytes(end - begin);
  return {begin, end};
}

// Filters whose string results carry exact content spans (they track them, or return a
// copy of an input, which keeps its own).
bool KeepsSpans(const std::string& name) {
  static const char* kNames[] = {"trim", "strip", "join", "default", "d",     "first",
                                 "last", "safe",  "min",  "max",     "string"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

Value RunFilter(const std::string& name, const Value& input, const CallArgs& args, int line,
                Budget& budget);

[[noreturn]] void TypeError(const std::string& filter, const Value& v, int line) {
  throw TemplateError("runtime",
                      absl::StrCat("filter '", filter, "' does not apply to ", v.TypeName()), line);
}

// The elements a filter iterates over: list items, dict keys, string characters (a copy,
// charged).
Array Items(const std::string& filter, const Value& v, int line, Budget& budget) {
  if (v.IsArray()) return CopyItems(*v.array, budget);
  if (v.IsObject() || v.IsString()) {
    const size_t n = v.IsObject() ? v.object->size() : v.s.size();
    budget.Steps(n);
    budget.Bytes(kContainerBytes);
    budget.Bytes(n, sizeof(Value));
    Array out;
    out.reserve(n);
    if (v.IsString()) {
      for (size_t k = 0; k < v.s.size(); ++k) {
        out.push_back(SpannedStr(std::string(1, v.s[k]), SliceSpans(v.spans, k, k + 1)));
      }
      return out;
    }
    for (const auto& [k, e] : *v.object) {
      budget.Bytes(k.size());
      out.push_back(Value::Str(k));
    }
    return out;
  }
  if (v.IsUndefined() || v.IsNone()) return {};  // llama.cpp: none filters as empty
  TypeError(filter, v, line);
}

// Attribute `path` ("a" or "a.b") of an item (a copy); undefined when absent.
Value Attribute(const Value& item, const std::string& path, Budget& budget) {
  const Value* cur = &item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const Value* next = cur->Find(key, budget);
    if (next == nullptr) return Value();
    cur = next;
    if (dot == std::string::npos) return Copy(*cur, budget);
    start = dot + 1;
  }
}

Value ToJsonFilter(const Value& input, const CallArgs& args, int line, Budget& budget) {
  const Value& indent = GetArg(args, 0, "indent");
  const Value& separators = GetArg(args, 99, "separators");
  if (GetArg(args, 99, "sort_keys").Truthy()) {
    throw TemplateError("unsupported", "unsupported tojson(sort_keys=true)", line);
  }
  const int64_t n = indent.kind == K::kInt ? indent.i : -1;
  std::string item_sep = n < 0 ? ", " : ",";
  std::string key_sep = ": ";
  if (separators.IsArray() && separators.array->size() == 2) {
    item_sep = (*separators.array)[0].ToString(budget);
    key_sep = (*separators.array)[1].ToString(budget);
  }
  return Value::Str(input.ToJson(n, item_sep, key_sep, budget));
}

Value Join(const Value& input, const CallArgs& args, int line, Budget& budget) {
  const Value& sep_arg = GetArg(args, 0, "d");
  const Value& attr = GetArg(args, 1, "attribute");
  const Value sep = sep_arg.IsString()
                        ? sep_arg
                        : Value::Str(sep_arg.IsUndefined() ? "" : sep_arg.ToString(budget));
  const std::string path = attr.IsUndefined() ? "" : attr.ToString(budget);
  SpannedText out;  // the items' and separators' content spans kept
  bool first = true;
  for (const Value& item : Items("join", input, line, budget)) {
    if (!first) {
      budget.Bytes(sep.s.size());
      out.Append(sep);
    }
    first = false;
    const Value v = attr.IsUndefined() ? item : Attribute(item, path, budget);
    if (v.IsString()) {
      budget.Bytes(v.s.size());
      out.Append(v);
      continue;
    }
    std::string text = v.ToString(budget);
    budget.Bytes(text.size());
    out.AppendPrinted(text, HasContent(v, budget));
  }
  return out.Take();
}

// select/reject (by test on the item) and selectattr/rejectattr (by test on an attribute).
Value Select(const std::string& name, const Value& input, const CallArgs& args, int line,
             Budget& budget) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep_if = name == "select" || name == "selectattr";
  const size_t test_pos = by_attr ? 1 : 0;
  const std::string attr = by_attr ? GetArg(args, 0, "attribute").ToString(budget) : "";
  const Value& test = GetArg(args, test_pos, "test");
  const std::string test_name = test.IsUndefined() ? "" : test.ToString(budget);
  CallArgs test_args;
  for (size_t k = test_pos + 1; k < args.positional.size(); ++k) {
    test_args.positional.push_back(Copy(args.positional[k], budget));
  }
  Array out;
  for (Value& item : Items(name, input, line, budget)) {
    Value attribute = by_attr ? Attribute(item, attr, budget) : Value();
    const Value& subject = by_attr ? attribute : item;
    bool pass = test.IsUndefined() ? subject.Truthy()
                                   : ApplyTest(test_name, subject, test_args, line, budget);
    if (pass == keep_if) out.push_back(std::move(item));
  }
  return Value::MakeArray(std::move(out));
}

Value Map(const Value& input, const CallArgs& args, int line, Budget& budget) {
  const Value& attr = GetArg(args, 99, "attribute");
  Array items = Items("map", input, line, budget);
  Array out;
  out.reserve(items.size());
  if (!attr.IsUndefined()) {
    const Value& fallback = GetArg(args, 99, "default");
    const std::string path = attr.ToString(budget);
    for (const Value& item : items) {
      Value v = Attribute(item, path, budget);
      out.push_back(v.IsUndefined() && !fallback.IsUndefined() ? Copy(fallback, budget)
                                                               : std::move(v));
    }
    return Value::MakeArray(std::move(out));
  }
  const Value& filter = GetArg(args, 0, "");
  if (!filter.IsString()) throw TemplateError("runtime", "map needs a filter name", line);
  CallArgs rest;
  for (size_t k = 1; k < args.positional.size(); ++k) {
    rest.positional.push_back(Copy(args.positional[k], budget));
  }
  for (const Value& item : items) out.push_back(ApplyFilter(filter.s, item, rest, line, budget));
  return Value::MakeArray(std::move(out));
}

Value Sort(const Value& input, const CallArgs& args, int line, Budget& budget) {
  Array items = Items("sort", input, line, budget);
  const bool reverse = GetArg(args, 0, "reverse").Truthy();
  const Value& attr = GetArg(args, 2, "attribute");
  // Each item's key once, then a stable sort of the positions by key.
  Array attributes;
  if (!attr.IsUndefined()) {
    const std::string path = attr.ToString(budget);
    attributes.reserve(items.size());
    for (const Value& v : items) attributes.push_back(Attribute(v, path, budget));
  }
  const Array& keys = attr.IsUndefined() ? items : attributes;
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? ValueLess(keys[b], keys[a], line, budget)
                   : ValueLess(keys[a], keys[b], line, budget);
  });
  Array out;
  out.reserve(items.size());
  for (size_t k : order) out.push_back(std::move(items[k]));
  return Value::MakeArray(std::move(out));
}

Value DictItems(const std::string& name, const Value& input, int line, Budget& budget) {
  if (input.IsUndefined()) return Value::MakeArray();
  if (!input.IsObject()) TypeError(name, input, line);
  const size_t n = input.object->size();
  budget.Steps(n);
  budget.Bytes(n + 1, kContainerBytes + 2 * sizeof(Value));
  Array out;
  out.reserve(n);
  for (const auto& [k, v] : *input.object) {
    budget.Bytes(k.size());
    out.push_back(Value::MakeArray({Value::Str(k), Copy(v, budget)}));
  }
  return Value::MakeArray(std::move(out));
}

// Jinja's indent(width=4, first=false, blank=false); width is spaces or a string.
Value Indent(const Value& input, const CallArgs& args, Budget& budget) {
  const Value& width = GetArg(args, 0, "width");
  const bool first = GetArg(args, 1, "first").Truthy();
  const bool blank = GetArg(args, 2, "blank").Truthy();
  std::string pad;
  if (width.IsString()) {
    pad = Copy(width, budget).s;
  } else {
    const int64_t spaces = width.kind == K::kInt ? std::max<int64_t>(width.i, 0) : 4;
    budget.Bytes(static_cast<uint64_t>(spaces));
    pad.assign(static_cast<size_t>(spaces), ' ');
  }
  const std::string s = input.ToString(budget);
  budget.Scan(s.size());
  const size_t lines = 1 + std::count(s.begin(), s.end(), '\n');
  budget.Bytes(lines, pad.size());
  budget.Bytes(s.size());
  std::string out;
  size_t start = 0;
  for (bool is_first = true;; is_first = false) {
    const size_t nl = s.find('\n', start);
    const size_t end = nl == std::string::npos ? s.size() : nl;
    if ((!is_first || first) && (blank || end > start)) out += pad;
    out.append(s, start, end - start);
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return Value::Str(std::move(out));
}

// `d` (not NaN) truncated to an integer; an error outside int64.
int64_t ToInt(double d, int line) {
  if (!(d > -9.2e18 && d < 9.2e18)) throw TemplateError("runtime", "int: out of range", line);
  return static_cast<int64_t>(d);
}

Value Number(const std::string& name, const Value& input, const CallArgs& args, int line,
             Budget& budget) {
  const Value& fallback = GetArg(args, 0, "default");
  const bool to_float = name == "float";
  double d = 0;
  bool parsed = true;
  if (input.kind == K::kInt) {
    if (!to_float) return input;
    d = static_cast<double>(input.i);
  } else if (input.kind == K::kFloat || input.kind == K::kBool) {
    d = input.kind == K::kBool ? input.b : input.f;
  } else if (input.IsString()) {
    budget.Scan(input.s.size());
    std::string text(absl::StripAsciiWhitespace(input.s));
    char* end = nullptr;
    d = std::strtod(text.c_str(), &end);
    parsed = !text.empty() && end == text.c_str() + text.size();
  } else {
    parsed = false;
  }
  if (!parsed || (!to_float && std::isnan(d))) {
    if (!fallback.IsUndefined()) return Copy(fallback, budget);
    return to_float ? Value::Float(0) : Value::Int(0);
  }
  return to_float ? Value::Float(d) : Value::Int(ToInt(d, line));
}

Value MinMax(const std::string& name, const Value& input, int line, Budget& budget) {
  Array items = Items(name, input, line, budget);
  if (items.empty()) return Value();
  size_t best = 0;
  for (size_t k = 1; k < items.size(); ++k) {
    if (name == "min" ? ValueLess(items[k], items[best], line, budget)
                      : ValueLess(items[best], items[k], line, budget)) {
      best = k;
    }
  }
  return std::move(items[best]);
}

// int, float, abs, min, max, sum.
Value NumericFilter(const std::string& name, const Value& input, const CallArgs& args, int line,
                    Budget& budget) {
  if (name == "int" || name == "float") return Number(name, input, args, line, budget);
  if (name == "min" || name == "max") return MinMax(name, input, line, budget);
  if (name == "abs") {
    if (input.kind == K::kInt) {
      if (input.i == INT64_MIN) throw TemplateError("runtime", "integer overflow in abs", line);
      return Value::Int(input.i < 0 ? -input.i : input.i);
    }
    if (input.kind == K::kFloat) return Value::Float(std::fabs(input.f));
    TypeError(name, input, line);
  }
  Value total = Value::Int(0);  // sum
  for (const Value& v : Items(name, input, line, budget)) {
    if (!v.IsNumber()) TypeError(name, v, line);
    if (total.kind == K::kInt && v.kind == K::kInt) {
      if (__builtin_add_overflow(total.i, v.i, &total.i)) {
        throw TemplateError("runtime", "integer overflow in sum", line);
      }
    } else {
      double t = total.kind == K::kInt ? total.i : total.f;
      total = Value::Float(t + (v.kind == K::kInt ? v.i : v.f));
    }
  }
  return total;
}

// `s` with every `from` replaced by `to`, its size charged before it is built.
std::string ReplaceAll(const std::string& s, const std::string& from, const std::string& to,
                       Budget& budget) {
  budget.Scan(s.size() + from.size());
  size_t count = 0;
  for (size_t at = FindText(s, from); at != std::string::npos;
       at = FindText(s, from, at + from.size())) {
    ++count;
  }
  budget.Steps(count);
  budget.Bytes(count, to.size());
  budget.Bytes(s.size());
  std::string out;
  size_t start = 0;
  for (size_t at = FindText(s, from); at != std::string::npos;
       at = FindText(s, from, at + from.size())) {
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
  }
  out.append(s, start, std::string::npos);
  return out;
}

Value StringFilter(const std::string& name, const Value& input, const CallArgs& args, int line,
                   Budget& budget) {
  std::string s = input.ToString(budget);
  budget.Scan(s.size());
  if (name == "upper" || name == "lower") {
    for (char& c : s) c = name == "upper" ? absl::ascii_toupper(c) : absl::ascii_tolower(c);
    return Value::Str(std::move(s));
  }
  if (name == "capitalize") {
    absl::AsciiStrToLower(&s);
    if (!s.empty()) s[0] = absl::ascii_toupper(s[0]);
    return Value::Str(std::move(s));
  }
  if (name == "title") {
    bool start = true;
    for (char& c : s) {
      c = start ? absl::ascii_toupper(c) : absl::ascii_tolower(c);
      start = !absl::ascii_isalnum(c);
    }
    return Value::Str(std::move(s));
  }
  if (name == "replace") {
    const Value& from = GetArg(args, 0, "old");
    const Value& to = GetArg(args, 1, "new");
    if (!from.IsString() || !to.IsString()) TypeError(name, from, line);
    if (from.s.empty()) return Value::Str(std::move(s));
    return Value::Str(ReplaceAll(s, from.s, to.s, budget));
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (char c : s) {
      bool space = absl::ascii_isspace(c);
      if (!space && !in_word) ++n;
      in_word = !space;
    }
    return Value::Int(n);
  }
  // trim / strip
  Value text = input.IsString() ? input : Value::Str(std::move(s));
  if (!input.IsString() && HasContent(input, budget)) MarkWhole(&text);
  return StripValue(text, GetArg(args, 0, "chars"), true, true, budget);
}

}  // namespace

const Value& GetArg(const CallArgs& args, size_t index, const char* keyword) {
  static const Value* const kUndefined = new Value();
  if (index < args.positional.size()) return args.positional[index];
  for (const auto& [k, v] : args.keyword) {
    if (k == keyword) return v;
  }
  return *kUndefined;
}

size_t FindText(std::string_view hay, std::string_view needle, size_t from) {
  if (from > hay.size()) return std::string::npos;
  if (needle.empty()) return from;
  const void* at = memmem(hay.data() + from, hay.size() - from, needle.data(), needle.size());
  return at == nullptr ? std::string::npos : static_cast<const char*>(at) - hay.data();
}

std::string StripText(const std::string& s, const Value& chars, bool left, bool right,
                      Budget& budget) {
  const auto [begin, end] = StripRange(s, chars, left, right, budget);
  return s.substr(begin, end - begin);
}

Value StripValue(const Value& s, const Value& chars, bool left, bool right, Budget& budget) {
  const auto [begin, end] = StripRange(s.s, chars, left, right, budget);
  return SpannedStr(s.s.substr(begin, end - begin), SliceSpans(s.spans, begin, end));
}

Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args, int line,
                  Budget& budget) {
  Value out = RunFilter(name, input, args, line, budget);
  if (out.IsString() && !KeepsSpans(name) && AnyContent(input, args, budget)) MarkWhole(&out);
  return out;
}

namespace {

Value RunFilter(const std::string& name, const Value& input, const CallArgs& args, int line,
                Budget& budget) {
  budget.Steps(1);
  if (name == "trim" || name == "strip" || name == "upper" || name == "lower" ||
      name == "capitalize" || name == "title" || name == "replace" || name == "wordcount") {
    return StringFilter(name, input, args, line, budget);
  }
  if (name == "tojson") return ToJsonFilter(input, args, line, budget);
  if (name == "length" || name == "count") {
    if (input.IsString()) return Value::Int(static_cast<int64_t>(input.s.size()));
    if (input.IsArray()) return Value::Int(static_cast<int64_t>(input.array->size()));
    if (input.IsObject()) return Value::Int(static_cast<int64_t>(input.object->size()));
    return Value::Int(static_cast<int64_t>(Items(name, input, line, budget).size()));
  }
  if (name == "string") {
    Value text = Value::Str(input.ToString(budget));
    if (input.IsString()) {
      text.spans = input.spans;
    } else if (HasContent(input, budget)) {
      MarkWhole(&text);
    }
    return text;
  }
  if (name == "safe" || name == "e" || name == "escape" || name == "list") {
    if (name == "list") return Value::MakeArray(Items(name, input, line, budget));
    if (name != "safe") throw TemplateError("unsupported", "unsupported filter 'escape'", line);
    return Copy(input, budget);
  }
  if (name == "default" || name == "d") {
    bool boolean = GetArg(args, 1, "boolean").Truthy();
    bool use_default = input.IsUndefined() || (boolean && !input.Truthy());
    if (!use_default) return Copy(input, budget);
    const Value& fallback = GetArg(args, 0, "default_value");
    return fallback.IsUndefined() ? Value::Str("") : Copy(fallback, budget);
  }
  if (name == "first" || name == "last") {
    if (input.IsArray()) {
      if (input.array->empty()) return Value();
      return Copy(name == "first" ? input.array->front() : input.array->back(), budget);
    }
    Array items = Items(name, input, line, budget);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "items" || name == "dictsort") {
    Value items = DictItems(name, input, line, budget);
    if (name == "dictsort") return Sort(items, CallArgs(), line, budget);
    return items;
  }
  if (name == "join") return Join(input, args, line, budget);
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    return Select(name, input, args, line, budget);
  }
  if (name == "map") return Map(input, args, line, budget);
  if (name == "sort") return Sort(input, args, line, budget);
  if (name == "reverse") {
    if (input.IsString()) {
      budget.Bytes(input.s.size());
      return Value::Str(std::string(input.s.rbegin(), input.s.rend()));
    }
    Array items = Items(name, input, line, budget);
    std::reverse(items.begin(), items.end());
    return Value::MakeArray(std::move(items));
  }
  if (name == "unique") {
    Array out;
    for (Value& v : Items(name, input, line, budget)) {
      bool seen = false;
      for (size_t k = 0; k < out.size() && !seen; ++k) seen = Equals(out[k], v, budget);
      if (!seen) out.push_back(std::move(v));
    }
    return Value::MakeArray(std::move(out));
  }
  if (name == "int" || name == "float" || name == "abs" || name == "sum" || name == "min" ||
      name == "max") {
    return NumericFilter(name, input, args, line, budget);
  }
  if (name == "indent") return Indent(input, args, budget);
  throw TemplateError("unsupported", absl::StrCat("unsupported filter '", name, "'"), line);
}

}  // namespace
}  // namespace pagoda::chat
