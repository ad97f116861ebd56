// Jinja tests: `value is name`.
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "chat/builtins.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

bool Less(const Value& a, const Value& b, int line) {
  if (a.IsNumber() && b.IsNumber()) {
    double x = a.kind == Value::Kind::kInt ? static_cast<double>(a.i) : a.f;
    double y = b.kind == Value::Kind::kInt ? static_cast<double>(b.i) : b.f;
    return x < y;
  }
  if (a.IsString() && b.IsString()) return a.s < b.s;
  throw TemplateError("runtime",
                      absl::StrCat("cannot compare ", a.TypeName(), " with ", b.TypeName()), line);
}

bool Contains(const Value& haystack, const Value& needle, int line) {
  if (haystack.IsString()) {
    if (!needle.IsString()) return false;
    return haystack.s.find(needle.s) != std::string::npos;
  }
  if (haystack.IsArray()) {
    for (const Value& v : *haystack.array) {
      if (Equals(v, needle)) return true;
    }
    return false;
  }
  if (haystack.IsObject()) return needle.IsString() && haystack.Find(needle.s) != nullptr;
  if (haystack.IsUndefined()) return false;
  throw TemplateError("runtime", absl::StrCat("'in' on a ", haystack.TypeName()), line);
}

}  // namespace

bool ApplyTest(const std::string& name, const Value& v, const CallArgs& args, int line) {
  using K = Value::Kind;
  const Value arg = GetArg(args, 0, "value");
  if (name == "defined") return !v.IsUndefined();
  if (name == "undefined") return v.IsUndefined();
  if (name == "none") return v.IsNone();
  if (name == "string") return v.IsString();
  if (name == "number") return v.IsNumber();
  if (name == "integer") return v.kind == K::kInt;
  if (name == "float") return v.kind == K::kFloat;
  if (name == "boolean") return v.kind == K::kBool;
  if (name == "true") return v.kind == K::kBool && v.b;
  if (name == "false") return v.kind == K::kBool && !v.b;
  if (name == "mapping") return v.IsObject();
  if (name == "sequence" || name == "iterable") {
    return v.IsArray() || v.IsString() || v.IsObject();
  }
  if (name == "callable") return v.kind == K::kFunction;
  if (name == "odd" || name == "even") {
    if (v.kind != K::kInt) throw TemplateError("runtime", "odd/even test of a non-integer", line);
    return (v.i % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    if (v.kind != K::kInt || arg.kind != K::kInt || arg.i == 0) {
      throw TemplateError("runtime", "divisibleby needs integers", line);
    }
    return v.i % arg.i == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return Equals(v, arg);
  if (name == "ne" || name == "!=") return !Equals(v, arg);
  if (name == "lt" || name == "lessthan" || name == "<") return Less(v, arg, line);
  if (name == "gt" || name == "greaterthan" || name == ">") return Less(arg, v, line);
  if (name == "le" || name == "<=") return !Less(arg, v, line);
  if (name == "ge" || name == ">=") return !Less(v, arg, line);
  if (name == "in") return Contains(arg, v, line);
  if (name == "sameas") {
    if (v.kind != arg.kind) return false;
    if (v.IsArray()) return v.array == arg.array;
    if (v.IsObject()) return v.object == arg.object;
    return Equals(v, arg);
  }
  if (name == "lower" || name == "upper") {
    if (!v.IsString()) return false;
    std::string t = name == "lower" ? absl::AsciiStrToLower(v.s) : absl::AsciiStrToUpper(v.s);
    return t == v.s;
  }
  throw TemplateError("unsupported", absl::StrCat("unsupported test 'is ", name, "'"), line);
}

// Membership for the `in` operator (exported through the interpreter).
bool ValueIn(const Value& needle, const Value& haystack, int line) {
  return Contains(haystack, needle, line);
}

// Ordering for comparison operators.
bool ValueLess(const Value& a, const Value& b, int line) { return Less(a, b, line); }

}  // namespace pagoda::chat
