// Jinja tests: `value is name`.
#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "chat/builtins.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

bool Less(const Value& a, const Value& b, int line, Budget& budget) {
  budget.Steps(1);
  if (a.IsNumber() && b.IsNumber()) {
    double x = a.kind == Value::Kind::kInt ? static_cast<double>(a.i) : a.f;
    double y = b.kind == Value::Kind::kInt ? static_cast<double>(b.i) : b.f;
    return x < y;
  }
  if (a.IsString() && b.IsString()) {
    budget.Scan(std::min(a.s.size(), b.s.size()));
    return a.s < b.s;
  }
  throw TemplateError("runtime",
                      absl::StrCat("cannot compare ", a.TypeName(), " with ", b.TypeName()), line);
}

bool Contains(const Value& haystack, const Value& needle, int line, Budget& budget) {
  budget.Steps(1);
  if (haystack.IsString()) {
    if (!needle.IsString()) return false;
    budget.Scan(haystack.s.size() + needle.s.size());
    return FindText(haystack.s, needle.s) != std::string::npos;
  }
  if (haystack.IsArray()) {
    for (const Value& v : *haystack.array) {
      if (Equals(v, needle, budget)) return true;
    }
    return false;
  }
  if (haystack.IsObject()) return needle.IsString() && haystack.Find(needle.s, budget) != nullptr;
  if (haystack.IsUndefined()) return false;
  throw TemplateError("runtime", absl::StrCat("'in' on a ", haystack.TypeName()), line);
}

}  // namespace

bool ApplyTest(const std::string& name, const Value& v, const CallArgs& args, int line,
               Budget& budget) {
  using K = Value::Kind;
  budget.Steps(1);
  const Value& arg = GetArg(args, 0, "value");
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
    return arg.i == -1 || v.i % arg.i == 0;  // INT64_MIN % -1 traps
  }
  if (name == "eq" || name == "equalto" || name == "==") return Equals(v, arg, budget);
  if (name == "ne" || name == "!=") return !Equals(v, arg, budget);
  if (name == "lt" || name == "lessthan" || name == "<") return Less(v, arg, line, budget);
  if (name == "gt" || name == "greaterthan" || name == ">") return Less(arg, v, line, budget);
  if (name == "le" || name == "<=") return !Less(arg, v, line, budget);
  if (name == "ge" || name == ">=") return !Less(v, arg, line, budget);
  if (name == "in") return Contains(arg, v, line, budget);
  if (name == "sameas") {
    if (v.kind != arg.kind) return false;
    if (v.IsArray()) return v.array == arg.array;
    if (v.IsObject()) return v.object == arg.object;
    return Equals(v, arg, budget);
  }
  if (name == "lower" || name == "upper") {
    if (!v.IsString()) return false;
    budget.Scan(v.s.size());
    budget.Bytes(v.s.size());
    std::string t = name == "lower" ? absl::AsciiStrToLower(v.s) : absl::AsciiStrToUpper(v.s);
    return t == v.s;
  }
  throw TemplateError("unsupported", absl::StrCat("unsupported test 'is ", name, "'"), line);
}

// Membership for the `in` operator (exported through the interpreter).
bool ValueIn(const Value& needle, const Value& haystack, int line, Budget& budget) {
  return Contains(haystack, needle, line, budget);
}

// Ordering for comparison operators.
bool ValueLess(const Value& a, const Value& b, int line, Budget& budget) {
  return Less(a, b, line, budget);
}

}  // namespace pagoda::chat
