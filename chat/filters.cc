// Jinja filters: `value | name(args)`.
#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "chat/builtins.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

using K = Value::Kind;

[[noreturn]] void TypeError(const std::string& filter, const Value& v, int line) {
  throw TemplateError("runtime",
                      absl::StrCat("filter '", filter, "' does not apply to ", v.TypeName()), line);
}

// The elements a filter iterates over: list items, dict keys, string characters.
Array Items(const std::string& filter, const Value& v, int line) {
  if (v.IsArray()) return *v.array;
  if (v.IsObject()) {
    Array keys;
    for (const auto& [k, e] : *v.object) keys.push_back(Value::Str(k));
    return keys;
  }
  if (v.IsString()) {
    Array chars;
    for (char c : v.s) chars.push_back(Value::Str(std::string(1, c)));
    return chars;
  }
  if (v.IsUndefined() || v.IsNone()) return {};  // llama.cpp: none filters as empty
  TypeError(filter, v, line);
}

// Attribute `path` ("a" or "a.b") of an item; undefined when absent.
Value Attribute(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const Value* next = cur.Find(key);
    if (next == nullptr) return Value();
    cur = *next;
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value ToJsonFilter(const Value& input, const CallArgs& args, int line) {
  Value indent = GetArg(args, 0, "indent");
  Value separators = GetArg(args, 99, "separators");
  if (GetArg(args, 99, "sort_keys").Truthy()) {
    throw TemplateError("unsupported", "unsupported tojson(sort_keys=true)", line);
  }
  int n = indent.kind == K::kInt ? static_cast<int>(indent.i) : -1;
  std::string item_sep = n < 0 ? ", " : ",";
  std::string key_sep = ": ";
  if (separators.IsArray() && separators.array->size() == 2) {
    item_sep = (*separators.array)[0].ToString();
    key_sep = (*separators.array)[1].ToString();
  }
  return Value::Str(input.ToJson(n, item_sep, key_sep));
}

Value Join(const Value& input, const CallArgs& args, int line) {
  Value sep = GetArg(args, 0, "d");
  Value attr = GetArg(args, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& v : Items("join", input, line)) {
    if (!first) out += sep.IsUndefined() ? "" : sep.ToString();
    first = false;
    out += attr.IsUndefined() ? v.ToString() : Attribute(v, attr.ToString()).ToString();
  }
  return Value::Str(out);
}

// select/reject (by test on the item) and selectattr/rejectattr (by test on an attribute).
Value Select(const std::string& name, const Value& input, const CallArgs& args, int line) {
  bool by_attr = name == "selectattr" || name == "rejectattr";
  bool keep_if = name == "select" || name == "selectattr";
  size_t test_pos = by_attr ? 1 : 0;
  Value attr = by_attr ? GetArg(args, 0, "attribute") : Value();
  Value test = GetArg(args, test_pos, "test");
  CallArgs test_args;
  for (size_t k = test_pos + 1; k < args.positional.size(); ++k) {
    test_args.positional.push_back(args.positional[k]);
  }
  Array out;
  for (const Value& item : Items(name, input, line)) {
    Value subject = by_attr ? Attribute(item, attr.ToString()) : item;
    bool pass = test.IsUndefined() ? subject.Truthy()
                                   : ApplyTest(test.ToString(), subject, test_args, line);
    if (pass == keep_if) out.push_back(item);
  }
  return Value::MakeArray(std::move(out));
}

Value Map(const Value& input, const CallArgs& args, int line) {
  Value attr = GetArg(args, 99, "attribute");
  Array out;
  if (!attr.IsUndefined()) {
    Value fallback = GetArg(args, 99, "default");
    for (const Value& item : Items("map", input, line)) {
      Value v = Attribute(item, attr.ToString());
      out.push_back(v.IsUndefined() && !fallback.IsUndefined() ? fallback : v);
    }
    return Value::MakeArray(std::move(out));
  }
  Value filter = GetArg(args, 0, "");
  if (!filter.IsString()) throw TemplateError("runtime", "map needs a filter name", line);
  CallArgs rest;
  for (size_t k = 1; k < args.positional.size(); ++k) rest.positional.push_back(args.positional[k]);
  for (const Value& item : Items("map", input, line)) {
    out.push_back(ApplyFilter(filter.s, item, rest, line));
  }
  return Value::MakeArray(std::move(out));
}

Value Sort(const Value& input, const CallArgs& args, int line) {
  Array items = Items("sort", input, line);
  bool reverse = GetArg(args, 0, "reverse").Truthy();
  Value attr = GetArg(args, 2, "attribute");
  auto key = [&](const Value& v) { return attr.IsUndefined() ? v : Attribute(v, attr.ToString()); };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? ValueLess(key(b), key(a), line) : ValueLess(key(a), key(b), line);
  });
  return Value::MakeArray(std::move(items));
}

Value DictItems(const std::string& name, const Value& input, int line) {
  if (input.IsUndefined()) return Value::MakeArray();
  if (!input.IsObject()) TypeError(name, input, line);
  Array out;
  for (const auto& [k, v] : *input.object) out.push_back(Value::MakeArray({Value::Str(k), v}));
  return Value::MakeArray(std::move(out));
}

Value Indent(const Value& input, const CallArgs& args) {
  Value width = GetArg(args, 0, "width");
  bool first = GetArg(args, 1, "first").Truthy();
  bool blank = GetArg(args, 2, "blank").Truthy();
  std::string pad =
      width.IsString() ? width.s : std::string(width.kind == K::kInt ? width.i : 4, ' ');
  std::string out;
  std::string s = input.ToString();
  size_t start = 0;
  bool is_first = true;
  while (start <= s.size()) {
    size_t nl = s.find('\n', start);
    std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((!is_first || first) && (blank || !line.empty())) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += "\n";
    start = nl + 1;
    is_first = false;
  }
  return Value::Str(out);
}

Value Number(const std::string& name, const Value& input, const CallArgs& args) {
  Value fallback = GetArg(args, 0, "default");
  if (input.IsNumber()) {
    if (name == "float") return Value::Float(input.kind == K::kInt ? input.i : input.f);
    return Value::Int(input.kind == K::kInt ? input.i : static_cast<int64_t>(input.f));
  }
  if (input.kind == K::kBool) return name == "int" ? Value::Int(input.b) : Value::Float(input.b);
  if (input.IsString()) {
    char* end = nullptr;
    std::string text(absl::StripAsciiWhitespace(input.s));
    double d = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size()) {
      return name == "float" ? Value::Float(d) : Value::Int(static_cast<int64_t>(d));
    }
  }
  if (!fallback.IsUndefined()) return fallback;
  return name == "float" ? Value::Float(0) : Value::Int(0);
}

Value MinMax(const std::string& name, const Value& input, int line) {
  Array items = Items(name, input, line);
  if (items.empty()) return Value();
  Value best = items[0];
  for (const Value& v : items) {
    if (name == "min" ? ValueLess(v, best, line) : ValueLess(best, v, line)) best = v;
  }
  return best;
}

Value StringFilter(const std::string& name, const Value& input, const CallArgs& args, int line) {
  std::string s = input.ToString();
  if (name == "upper") return Value::Str(absl::AsciiStrToUpper(s));
  if (name == "lower") return Value::Str(absl::AsciiStrToLower(s));
  if (name == "capitalize") {
    s = absl::AsciiStrToLower(s);
    if (!s.empty()) s[0] = absl::ascii_toupper(s[0]);
    return Value::Str(s);
  }
  if (name == "title") {
    bool start = true;
    for (char& c : s) {
      c = start ? absl::ascii_toupper(c) : absl::ascii_tolower(c);
      start = !absl::ascii_isalnum(c);
    }
    return Value::Str(s);
  }
  if (name == "replace") {
    Value from = GetArg(args, 0, "old");
    Value to = GetArg(args, 1, "new");
    if (!from.IsString() || !to.IsString()) TypeError(name, from, line);
    if (from.s.empty()) return Value::Str(s);
    return Value::Str(absl::StrReplaceAll(s, {{from.s, to.s}}));
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
  return Value::Str(StripText(s, GetArg(args, 0, "chars"), true, true));
}

}  // namespace

Value GetArg(const CallArgs& args, size_t index, const char* keyword) {
  if (index < args.positional.size()) return args.positional[index];
  for (const auto& [k, v] : args.keyword) {
    if (k == keyword) return v;
  }
  return Value();
}

std::string StripText(const std::string& s, const Value& chars, bool left, bool right) {
  std::string set = chars.IsString() ? chars.s : std::string(" \t\n\r\f\v");
  size_t begin = left ? s.find_first_not_of(set) : 0;
  if (begin == std::string::npos) return "";
  size_t end = right ? s.find_last_not_of(set) + 1 : s.size();
  return s.substr(begin, end - begin);
}

Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args, int line) {
  if (name == "trim" || name == "strip" || name == "upper" || name == "lower" ||
      name == "capitalize" || name == "title" || name == "replace" || name == "wordcount") {
    return StringFilter(name, input, args, line);
  }
  if (name == "tojson") return ToJsonFilter(input, args, line);
  if (name == "length" || name == "count") {
    if (input.IsString()) return Value::Int(static_cast<int64_t>(input.s.size()));
    return Value::Int(static_cast<int64_t>(Items(name, input, line).size()));
  }
  if (name == "string") return Value::Str(input.ToString());
  if (name == "safe" || name == "e" || name == "escape" || name == "list") {
    if (name == "list") return Value::MakeArray(Items(name, input, line));
    if (name != "safe") throw TemplateError("unsupported", "unsupported filter 'escape'", line);
    return input;
  }
  if (name == "default" || name == "d") {
    bool boolean = GetArg(args, 1, "boolean").Truthy();
    bool use_default = input.IsUndefined() || (boolean && !input.Truthy());
    if (!use_default) return input;
    Value fallback = GetArg(args, 0, "default_value");
    return fallback.IsUndefined() ? Value::Str("") : fallback;
  }
  if (name == "first" || name == "last") {
    Array items = Items(name, input, line);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "items" || name == "dictsort") {
    Value items = DictItems(name, input, line);
    if (name == "dictsort") return Sort(items, CallArgs(), line);
    return items;
  }
  if (name == "join") return Join(input, args, line);
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    return Select(name, input, args, line);
  }
  if (name == "map") return Map(input, args, line);
  if (name == "sort") return Sort(input, args, line);
  if (name == "reverse") {
    if (input.IsString()) return Value::Str(std::string(input.s.rbegin(), input.s.rend()));
    Array items = Items(name, input, line);
    std::reverse(items.begin(), items.end());
    return Value::MakeArray(std::move(items));
  }
  if (name == "unique") {
    Array out;
    for (const Value& v : Items(name, input, line)) {
      if (!ValueIn(v, Value::MakeArray(out), line)) out.push_back(v);
    }
    return Value::MakeArray(std::move(out));
  }
  if (name == "int" || name == "float") return Number(name, input, args);
  if (name == "abs") {
    if (input.kind == K::kInt) return Value::Int(input.i < 0 ? -input.i : input.i);
    if (input.kind == K::kFloat) return Value::Float(std::fabs(input.f));
    TypeError(name, input, line);
  }
  if (name == "min" || name == "max") return MinMax(name, input, line);
  if (name == "sum") {
    Value total = Value::Int(0);
    for (const Value& v : Items(name, input, line)) {
      if (!v.IsNumber()) TypeError(name, v, line);
      if (total.kind == K::kInt && v.kind == K::kInt) {
        total.i += v.i;
      } else {
        double t = total.kind == K::kInt ? total.i : total.f;
        total = Value::Float(t + (v.kind == K::kInt ? v.i : v.f));
      }
    }
    return total;
  }
  if (name == "indent") return Indent(input, args);
  throw TemplateError("unsupported", absl::StrCat("unsupported filter '", name, "'"), line);
}

}  // namespace pagoda::chat
