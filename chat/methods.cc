// Methods of values: `"text".strip()`, `list.append(x)`, `dict.items()`.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "chat/builtins.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

using K = Value::Kind;

bool StartsOrEnds(const std::string& s, const Value& affix, bool start, Budget& budget) {
  auto one = [&](const std::string& a) {
    budget.Scan(a.size());
    if (a.size() > s.size()) return false;
    return start ? s.compare(0, a.size(), a) == 0
                 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.IsArray()) {
    for (const Value& v : *affix.array) {
      if (v.IsString() && one(v.s)) return true;
    }
    return false;
  }
  return affix.IsString() && one(affix.s);
}

// Appends `piece` to `parts` as a string value, charging it first.
void AddPart(std::string piece, Array& parts, Budget& budget) {
  budget.Steps(1);
  budget.Bytes(sizeof(Value) + piece.size());
  parts.push_back(Value::Str(std::move(piece)));
}

// Python's str.split() without a separator: on runs of whitespace.
Value SplitOnWhitespace(const std::string& s, int64_t limit, Budget& budget) {
  budget.Scan(s.size());
  Array parts;
  size_t k = 0;
  while (k < s.size()) {
    while (k < s.size() && absl::ascii_isspace(s[k])) ++k;
    if (k >= s.size()) break;
    size_t end = k;
    if (limit >= 0 && static_cast<int64_t>(parts.size()) == limit) {
      end = s.find_last_not_of(" \t\n\r\f\v") + 1;
    } else {
      while (end < s.size() && !absl::ascii_isspace(s[end])) ++end;
    }
    AddPart(s.substr(k, end - k), parts, budget);
    k = end;
  }
  return Value::MakeArray(std::move(parts));
}

// Python's str.split/rsplit: on each separator, at most `limit` splits (all when < 0),
// counted from the right for rsplit (which splits the reversed text, in linear time).
Value Split(const std::string& s, const CallArgs& args, bool from_right, int line, Budget& budget) {
  const Value& sep = GetArg(args, 0, "sep");
  const Value& max = GetArg(args, 1, "maxsplit");
  const int64_t limit = max.kind == K::kInt ? max.i : -1;
  if (sep.IsUndefined() || sep.IsNone()) {
    if (from_right) throw TemplateError("unsupported", "unsupported rsplit() without sep", line);
    return SplitOnWhitespace(s, limit, budget);
  }
  if (!sep.IsString() || sep.s.empty()) {
    throw TemplateError("runtime", "split: empty separator", line);
  }
  budget.Scan(s.size() + sep.s.size());
  std::string text = s, needle = sep.s;
  if (from_right) {
    budget.Bytes(s.size() + needle.size());
    std::reverse(text.begin(), text.end());
    std::reverse(needle.begin(), needle.end());
  }
  Array parts;
  size_t start = 0;
  while (true) {
    size_t at = FindText(text, needle, start);
    if (at == std::string::npos || (limit >= 0 && static_cast<int64_t>(parts.size()) == limit)) {
      AddPart(text.substr(start), parts, budget);
      break;
    }
    AddPart(text.substr(start, at - start), parts, budget);
    start = at + needle.size();
  }
  if (from_right) {
    std::reverse(parts.begin(), parts.end());
    for (Value& p : parts) std::reverse(p.s.begin(), p.s.end());
  }
  return Value::MakeArray(std::move(parts));
}

// Python's str.format for plain fields: "{}", "{0}", "{name}", "{{" and "}}" (no format
// specs or conversions).
Value Format(const std::string& s, const CallArgs& args, int line, Budget& budget) {
  budget.Scan(s.size());
  budget.Bytes(s.size());
  std::string out;
  size_t next_auto = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    char c = s[k];
    if ((c == '{' || c == '}') && k + 1 < s.size() && s[k + 1] == c) {
      out.push_back(c);
      ++k;
      continue;
    }
    if (c == '}') throw TemplateError("runtime", "format: single '}'", line);
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    size_t close = s.find('}', k);
    if (close == std::string::npos) throw TemplateError("runtime", "format: unclosed '{'", line);
    std::string field = s.substr(k + 1, close - k - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      throw TemplateError("unsupported", absl::StrCat("unsupported format field {", field, "}"),
                          line);
    }
    const Value* v = nullptr;
    size_t index = 0;
    if (field.empty()) {
      v = &GetArg(args, next_auto++, "");
    } else if (absl::ascii_isdigit(field[0])) {
      v = absl::SimpleAtoi(field, &index) ? &GetArg(args, index, "") : &GetArg(args, -1, "");
    } else {
      v = &GetArg(args, SIZE_MAX, field.c_str());
    }
    if (v->IsUndefined()) {
      throw TemplateError("runtime", absl::StrCat("format: no argument for {", field, "}"), line);
    }
    std::string text = v->ToString(budget);
    budget.Bytes(text.size());
    out += text;
    k = close;
  }
  return Value::Str(std::move(out));
}

// A method of string `self`. Results keep content spans (chat/spans.h): exactly for strip
// and join; split's parts and format's result are all content when their inputs had any.
Value StringMethod(const Value& self, const std::string& name, const CallArgs& args, int line,
                   Budget& budget) {
  const std::string& s = self.s;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return StripValue(self, GetArg(args, 0, "chars"), name != "rstrip", name != "lstrip", budget);
  }
  if (name == "startswith" || name == "endswith") {
    return Value::Bool(StartsOrEnds(s, GetArg(args, 0, "prefix"), name == "startswith", budget));
  }
  if (name == "split" || name == "rsplit") {
    Value parts = Split(s, args, name == "rsplit", line, budget);
    if (!self.spans.empty()) {
      for (Value& part : *parts.array) MarkWhole(&part);
    }
    return parts;
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "replace") {
    if (name == "replace" && GetArg(args, 2, "count").kind == K::kInt) {
      throw TemplateError("unsupported", "unsupported str.replace with a count", line);
    }
    return ApplyFilter(name, Copy(self, budget), args, line, budget);
  }
  if (name == "find" || name == "count") {
    const std::string needle = GetArg(args, 0, "sub").ToString(budget);
    budget.Scan(s.size() + needle.size());
    if (name == "find") {
      size_t at = FindText(s, needle);
      return Value::Int(at == std::string::npos ? -1 : static_cast<int64_t>(at));
    }
    if (needle.empty()) return Value::Int(static_cast<int64_t>(s.size() + 1));
    int64_t n = 0;
    for (size_t at = FindText(s, needle); at != std::string::npos;
         at = FindText(s, needle, at + needle.size())) {
      ++n;
    }
    return Value::Int(n);
  }
  if (name == "join") {
    CallArgs join_args;
    join_args.positional.push_back(Copy(self, budget));
    return ApplyFilter("join", GetArg(args, 0, "iterable"), join_args, line, budget);
  }
  if (name == "format") {
    Value out = Format(s, args, line, budget);
    if (AnyContent(self, args, budget)) MarkWhole(&out);
    return out;
  }
  // isdigit / isalpha / isspace
  budget.Scan(s.size());
  if (s.empty()) return Value::Bool(false);
  for (char c : s) {
    bool ok = name == "isdigit"   ? absl::ascii_isdigit(c)
              : name == "isalpha" ? absl::ascii_isalpha(c)
                                  : absl::ascii_isspace(c);
    if (!ok) return Value::Bool(false);
  }
  return Value::Bool(true);
}

Value ArrayMethod(const Value& self, const std::string& name, CallArgs& args, int line,
                  Budget& budget) {
  Array& items = *self.array;
  if (name == "append") {
    const Value& item = GetArg(args, 0, "x");
    CheckInsert(self, item, line, budget);
    budget.Bytes(sizeof(Value));
    items.push_back(Copy(item, budget));
    return Value::None();
  }
  if (name == "extend") {
    const Value& more = GetArg(args, 0, "iterable");
    if (!more.IsArray()) throw TemplateError("runtime", "extend needs a list", line);
    CheckInsert(self, more, line, budget);
    Array copy = CopyItems(*more.array, budget);
    items.insert(items.end(), std::make_move_iterator(copy.begin()),
                 std::make_move_iterator(copy.end()));
    return Value::None();
  }
  if (name == "pop") {
    if (items.empty()) throw TemplateError("runtime", "pop from an empty list", line);
    const Value& index = GetArg(args, 0, "index");
    int64_t n = static_cast<int64_t>(items.size());
    int64_t k =
        index.kind == K::kInt ? (index.i < 0 && index.i >= -n ? index.i + n : index.i) : n - 1;
    if (k < 0 || k >= n) throw TemplateError("runtime", "pop index out of range", line);
    budget.Steps(static_cast<uint64_t>(n - k));
    Value out = std::move(items[k]);
    items.erase(items.begin() + k);
    return out;
  }
  // index
  const Value& needle = GetArg(args, 0, "x");
  for (size_t k = 0; k < items.size(); ++k) {
    if (Equals(items[k], needle, budget)) return Value::Int(static_cast<int64_t>(k));
  }
  throw TemplateError("runtime", "list.index: value not in list", line);
}

Value ObjectMethod(const Value& self, const std::string& name, CallArgs& args, int line,
                   Budget& budget) {
  if (name == "items") return ApplyFilter("items", self, args, line, budget);
  if (name == "keys" || name == "values") {
    Array out;
    budget.Steps(self.object->size());
    budget.Bytes(kContainerBytes);
    budget.Bytes(self.object->size(), sizeof(Value));
    for (const auto& [k, v] : *self.object) {
      out.push_back(name == "keys" ? Copy(Value::Str(k), budget) : Copy(v, budget));
    }
    return Value::MakeArray(std::move(out));
  }
  if (name == "get") {
    const Value* found = self.Find(GetArg(args, 0, "key").ToString(budget), budget);
    if (found != nullptr) return Copy(*found, budget);
    const Value& fallback = GetArg(args, 1, "default");
    return fallback.IsUndefined() ? Value::None() : Copy(fallback, budget);
  }
  // update
  const Value& other = GetArg(args, 0, "other");
  if (other.IsObject() && other.object != self.object) {
    for (const auto& [k, v] : *other.object) SetKey(self, k, v, line, budget);
  }
  for (const auto& [k, v] : args.keyword) SetKey(self, k, v, line, budget);
  return Value::None();
}

void CheckInsertAt(const void* container, const Value& v, int depth, int line, Budget& budget) {
  if (!v.IsArray() && !v.IsObject()) return;
  budget.CheckDepth(depth + 1);
  const void* self = v.IsArray() ? static_cast<const void*>(v.array.get()) : v.object.get();
  if (self == container) {
    throw TemplateError("runtime", "a list or dict cannot hold itself", line);
  }
  if (v.IsArray()) {
    budget.Steps(1 + v.array->size() / 16);
    for (const Value& item : *v.array) CheckInsertAt(container, item, depth + 1, line, budget);
  } else {
    budget.Steps(1 + v.object->size() / 16);
    for (const auto& [k, item] : *v.object) {
      CheckInsertAt(container, item, depth + 1, line, budget);
    }
  }
}

}  // namespace

bool HasMethod(K kind, const std::string& name) {
  static const char* kString[] = {"strip",      "lstrip",  "rstrip",  "startswith", "endswith",
                                  "split",      "rsplit",  "upper",   "lower",      "title",
                                  "capitalize", "replace", "find",    "count",      "join",
                                  "isdigit",    "isalpha", "isspace", "format"};
  static const char* kArray[] = {"append", "extend", "pop", "index"};
  static const char* kObject[] = {"items", "keys", "values", "get", "update"};
  auto in = [&](const auto& list) {
    for (const char* n : list) {
      if (name == n) return true;
    }
    return false;
  };
  if (kind == K::kString) return in(kString);
  if (kind == K::kArray) return in(kArray);
  if (kind == K::kObject) return in(kObject);
  return false;
}

Value CallMethod(const Value& self, const std::string& name, CallArgs& args, int line,
                 Budget& budget) {
  budget.Steps(1);
  if (self.IsString()) return StringMethod(self, name, args, line, budget);
  if (self.IsArray()) return ArrayMethod(self, name, args, line, budget);
  return ObjectMethod(self, name, args, line, budget);
}

Value GetMethod(const Value& self, const std::string& name, int line, Budget& budget) {
  if (!HasMethod(self.kind, name)) return Value();
  budget.Bytes(kContainerBytes);
  Budget* meter = &budget;  // a function value never outlives its render
  if (self.IsString()) {
    Value text = Copy(self, budget);
    return Value::Func([text = std::move(text), name, line, meter](CallArgs& args) {
      return CallMethod(text, name, args, line, *meter);
    });
  }
  // Weakly: a list holding its own bound method would otherwise never be freed.
  std::weak_ptr<Array> array = self.array;
  std::weak_ptr<Object> object = self.object;
  const K kind = self.kind;
  return Value::Func([array, object, kind, name, line, meter](CallArgs& args) {
    Value bound;
    bound.kind = kind;
    bound.array = array.lock();
    bound.object = object.lock();
    if (bound.array == nullptr && bound.object == nullptr) {
      throw TemplateError("runtime", absl::StrCat("'", name, "' of a value that is gone"), line);
    }
    return CallMethod(bound, name, args, line, *meter);
  });
}

void SetKey(const Value& object, const std::string& key, const Value& v, int line, Budget& budget) {
  CheckInsert(object, v, line, budget);
  budget.Steps(object.object->size());
  for (auto& [k, slot] : *object.object) {
    if (k.size() != key.size()) continue;
    budget.Scan(key.size());
    if (k == key) {
      slot = Copy(v, budget);
      return;
    }
  }
  budget.Bytes(sizeof(std::pair<std::string, Value>) + key.size());
  object.object->emplace_back(key, Copy(v, budget));
}

void CheckInsert(const Value& container, const Value& item, int line, Budget& budget) {
  const void* self = container.IsArray() ? static_cast<const void*>(container.array.get())
                                         : container.object.get();
  CheckInsertAt(self, item, 1, line, budget);
}

}  // namespace pagoda::chat
