// Methods of values: `"text".strip()`, `list.append(x)`, `dict.items()`.
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "chat/builtins.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

using K = Value::Kind;

bool StartsOrEnds(const std::string& s, const Value& affix, bool start) {
  auto one = [&](const std::string& a) {
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

// Python's str.split: on runs of whitespace without a separator, else on each separator.
Value Split(const std::string& s, const CallArgs& args, bool from_right, int line) {
  Value sep = GetArg(args, 0, "sep");
  Value max = GetArg(args, 1, "maxsplit");
  int64_t limit = max.kind == K::kInt ? max.i : -1;
  Array parts;
  if (sep.IsUndefined() || sep.IsNone()) {
    if (from_right) throw TemplateError("unsupported", "unsupported rsplit() without sep", line);
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
      parts.push_back(Value::Str(s.substr(k, end - k)));
      k = end;
    }
    return Value::MakeArray(std::move(parts));
  }
  if (!sep.IsString() || sep.s.empty())
    throw TemplateError("runtime", "split: empty separator", line);
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t start = 0;
    while (true) {
      size_t at = s.find(sep.s, start);
      if (at == std::string::npos || (limit >= 0 && static_cast<int64_t>(pieces.size()) == limit)) {
        pieces.push_back(s.substr(start));
        break;
      }
      pieces.push_back(s.substr(start, at - start));
      start = at + sep.s.size();
    }
  } else {
    size_t end = s.size();
    while (true) {
      size_t at = end >= sep.s.size() ? s.rfind(sep.s, end - sep.s.size()) : std::string::npos;
      if (at == std::string::npos || (limit >= 0 && static_cast<int64_t>(pieces.size()) == limit)) {
        pieces.insert(pieces.begin(), s.substr(0, end));
        break;
      }
      pieces.insert(pieces.begin(), s.substr(at + sep.s.size(), end - at - sep.s.size()));
      end = at;
    }
  }
  for (auto& p : pieces) parts.push_back(Value::Str(std::move(p)));
  return Value::MakeArray(std::move(parts));
}

// Python's str.format for plain fields: "{}", "{0}", "{name}", "{{" and "}}" (no format
// specs or conversions).
Value Format(const std::string& s, const CallArgs& args, int line) {
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
    Value v;
    if (field.empty()) {
      v = GetArg(args, next_auto++, "");
    } else if (absl::ascii_isdigit(field[0])) {
      v = GetArg(args, static_cast<size_t>(std::stoul(field)), "");
    } else {
      v = GetArg(args, SIZE_MAX, field.c_str());
    }
    if (v.IsUndefined()) {
      throw TemplateError("runtime", absl::StrCat("format: no argument for {", field, "}"), line);
    }
    out += v.ToString();
    k = close;
  }
  return Value::Str(out);
}

Value StringMethod(const std::string& s, const std::string& name, const CallArgs& args, int line) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::Str(StripText(s, GetArg(args, 0, "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    return Value::Bool(StartsOrEnds(s, GetArg(args, 0, "prefix"), name == "startswith"));
  }
  if (name == "split" || name == "rsplit") return Split(s, args, name == "rsplit", line);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "replace") {
    if (name == "replace" && GetArg(args, 2, "count").kind == K::kInt) {
      throw TemplateError("unsupported", "unsupported str.replace with a count", line);
    }
    return ApplyFilter(name, Value::Str(s), args, line);
  }
  if (name == "find") {
    Value needle = GetArg(args, 0, "sub");
    size_t at = s.find(needle.ToString());
    return Value::Int(at == std::string::npos ? -1 : static_cast<int64_t>(at));
  }
  if (name == "count") {
    std::string needle = GetArg(args, 0, "sub").ToString();
    if (needle.empty()) return Value::Int(static_cast<int64_t>(s.size() + 1));
    int64_t n = 0;
    for (size_t at = s.find(needle); at != std::string::npos;
         at = s.find(needle, at + needle.size()))
      ++n;
    return Value::Int(n);
  }
  if (name == "join") {
    Value items = GetArg(args, 0, "iterable");
    CallArgs join_args;
    join_args.positional.push_back(Value::Str(s));
    return ApplyFilter("join", items, join_args, line);
  }
  if (name == "format") return Format(s, args, line);
  if (name == "isdigit" || name == "isalpha" || name == "isspace") {
    if (s.empty()) return Value::Bool(false);
    for (char c : s) {
      bool ok = name == "isdigit"   ? absl::ascii_isdigit(c)
                : name == "isalpha" ? absl::ascii_isalpha(c)
                                    : absl::ascii_isspace(c);
      if (!ok) return Value::Bool(false);
    }
    return Value::Bool(true);
  }
  throw TemplateError("unsupported", absl::StrCat("unsupported string method '", name, "'"), line);
}

Value ArrayMethod(const Value& self, const std::string& name, CallArgs& args, int line) {
  if (name == "append") {
    self.array->push_back(GetArg(args, 0, "x"));
    return Value::None();
  }
  if (name == "extend") {
    Value more = GetArg(args, 0, "iterable");
    if (!more.IsArray()) throw TemplateError("runtime", "extend needs a list", line);
    Array copy = *more.array;
    self.array->insert(self.array->end(), copy.begin(), copy.end());
    return Value::None();
  }
  if (name == "pop") {
    if (self.array->empty()) throw TemplateError("runtime", "pop from an empty list", line);
    Value index = GetArg(args, 0, "index");
    int64_t n = static_cast<int64_t>(self.array->size());
    int64_t k = index.kind == K::kInt ? (index.i < 0 ? index.i + n : index.i) : n - 1;
    if (k < 0 || k >= n) throw TemplateError("runtime", "pop index out of range", line);
    Value out = (*self.array)[k];
    self.array->erase(self.array->begin() + k);
    return out;
  }
  if (name == "index") {
    Value needle = GetArg(args, 0, "x");
    for (size_t k = 0; k < self.array->size(); ++k) {
      if (Equals((*self.array)[k], needle)) return Value::Int(static_cast<int64_t>(k));
    }
    throw TemplateError("runtime", "list.index: value not in list", line);
  }
  throw TemplateError("unsupported", absl::StrCat("unsupported list method '", name, "'"), line);
}

Value ObjectMethod(const Value& self, const std::string& name, CallArgs& args, int line) {
  if (name == "items") return ApplyFilter("items", self, args, line);
  if (name == "keys" || name == "values") {
    Array out;
    for (const auto& [k, v] : *self.object) out.push_back(name == "keys" ? Value::Str(k) : v);
    return Value::MakeArray(std::move(out));
  }
  if (name == "get") {
    const Value* found = self.Find(GetArg(args, 0, "key").ToString());
    if (found != nullptr) return *found;
    Value fallback = GetArg(args, 1, "default");
    return fallback.IsUndefined() ? Value::None() : fallback;
  }
  if (name == "update") {
    Value other = GetArg(args, 0, "other");
    if (other.IsObject()) {
      for (const auto& [k, v] : *other.object) {
        Value* slot = nullptr;
        for (auto& [sk, sv] : *self.object) {
          if (sk == k) slot = &sv;
        }
        if (slot)
          *slot = v;
        else
          self.object->emplace_back(k, v);
      }
    }
    for (const auto& [k, v] : args.keyword) self.object->emplace_back(k, v);
    return Value::None();
  }
  throw TemplateError("unsupported", absl::StrCat("unsupported dict method '", name, "'"), line);
}

bool IsMethodName(K kind, const std::string& name) {
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

}  // namespace

Value GetMethod(const Value& self, const std::string& name, int line) {
  if (!IsMethodName(self.kind, name)) return Value();
  return Value::Func([self, name, line](CallArgs& args) {
    if (self.IsString()) return StringMethod(self.s, name, args, line);
    if (self.IsArray()) return ArrayMethod(self, name, args, line);
    return ObjectMethod(self, name, args, line);
  });
}

}  // namespace pagoda::chat
