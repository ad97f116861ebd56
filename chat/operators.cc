// Jinja's binary operators and slicing over Values, with Python's semantics where they
// stay inside 64-bit integers (overflow is an error, not a bignum).
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "chat/builtins.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

using K = Value::Kind;

[[noreturn]] void Fail(int line, const std::string& msg) {
  throw TemplateError("runtime", msg, line);
}

double AsDouble(const Value& v) { return v.kind == K::kInt ? static_cast<double>(v.i) : v.f; }

// `a op b` for two integers (+ - * // % **), failing where the result leaves int64.
Value IntArithmetic(const std::string& op, int64_t a, int64_t b, int line) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") {
    overflow = __builtin_add_overflow(a, b, &r);
  } else if (op == "-") {
    overflow = __builtin_sub_overflow(a, b, &r);
  } else if (op == "*") {
    overflow = __builtin_mul_overflow(a, b, &r);
  } else if (op == "**") {
    r = 1;
    for (int64_t base = a, e = b; e > 0 && !overflow; e >>= 1) {
      if (e & 1) overflow = __builtin_mul_overflow(r, base, &r);
      if (e > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
    }
  } else if (op == "//" || op == "%") {
    if (b == 0) Fail(line, "division by zero");
    if (b == -1) {  // INT64_MIN // -1 traps
      if (op == "%") return Value::Int(0);
      overflow = __builtin_sub_overflow(int64_t{0}, a, &r);
    } else {
      int64_t q = a / b;
      int64_t m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {
        --q;
        m += b;
      }
      r = op == "//" ? q : m;
    }
  }
  if (overflow) Fail(line, absl::StrCat("integer overflow in '", op, "'"));
  return Value::Int(r);
}

// `a` followed by `b` (strings), content spans included.
Value Concat(const std::string& left, const Spans& left_spans, const std::string& right,
             const Spans& right_spans) {
  Spans spans = left_spans;
  AppendSpans(right_spans, left.size(), &spans);
  return SpannedStr(left + right, std::move(spans));
}

// `text * count` (Python: empty for count <= 0), its size charged before it is built; all
// content when `text` has any.
Value Repeat(const std::string& text, bool content, int64_t count, Budget& budget) {
  if (count <= 0 || text.empty()) return Value::Str("");
  budget.Bytes(static_cast<uint64_t>(count), text.size());
  const size_t total = text.size() * static_cast<size_t>(count);  // charged: no overflow
  budget.Scan(total);
  std::string out = text;
  out.reserve(total);
  while (out.size() <= total / 2) out.append(out);  // doubling: log(count) copies
  out.append(out, 0, total - out.size());
  Value v = Value::Str(std::move(out));
  if (content) MarkWhole(&v);
  return v;
}

Value Arithmetic(const std::string& op, const Value& a, const Value& b, int line, Budget& budget) {
  if (op == "+" && a.IsString() && b.IsString()) {
    budget.Bytes(a.s.size());
    budget.Bytes(b.s.size());
    return Concat(a.s, a.spans, b.s, b.spans);
  }
  if (op == "+" && a.IsArray() && b.IsArray()) {
    Array joined = CopyItems(*a.array, budget);
    Array tail = CopyItems(*b.array, budget);
    joined.insert(joined.end(), std::make_move_iterator(tail.begin()),
                  std::make_move_iterator(tail.end()));
    return Value::MakeArray(std::move(joined));
  }
  if (op == "*" && a.IsString() && b.kind == K::kInt)
    return Repeat(a.s, !a.spans.empty(), b.i, budget);
  if (!a.IsNumber() || !b.IsNumber()) {
    Fail(line, absl::StrCat("cannot apply '", op, "' to ", a.TypeName(), " and ", b.TypeName()));
  }
  const bool ints = a.kind == K::kInt && b.kind == K::kInt;
  if (ints && op != "/" && (op != "**" || b.i >= 0)) return IntArithmetic(op, a.i, b.i, line);
  const double x = AsDouble(a), y = AsDouble(b);
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "**") return Value::Float(std::pow(x, y));
  if (y == 0) Fail(line, "division by zero");
  if (op == "/") return Value::Float(x / y);
  if (op == "//") return Value::Float(std::floor(x / y));
  if (op == "%") return Value::Float(x - y * std::floor(x / y));
  Fail(line, absl::StrCat("unsupported operator '", op, "'"));
}

}  // namespace

Value BinaryOp(const std::string& op, const Value& a, const Value& b, int line, Budget& budget) {
  if (op == "==") return Value::Bool(Equals(a, b, budget));
  if (op == "!=") return Value::Bool(!Equals(a, b, budget));
  if (op == "in") return Value::Bool(ValueIn(a, b, line, budget));
  if (op == "not in") return Value::Bool(!ValueIn(a, b, line, budget));
  const bool a_null = a.IsUndefined() || a.IsNone();
  const bool b_null = b.IsUndefined() || b.IsNone();
  if (op == "~") {
    // llama.cpp: none/undefined next to a string concatenates as empty.
    std::string left = a_null && b.IsString() ? "" : a.ToString(budget);
    std::string right = b_null && a.IsString() ? "" : b.ToString(budget);
    budget.Bytes(left.size());
    budget.Bytes(right.size());
    // A printed list or dict holding content is content as a whole.
    auto spans_of = [&](const Value& v, const std::string& text) -> Spans {
      if (v.IsString()) return v.spans.get();
      return !text.empty() && HasContent(v, budget) ? Spans{{0, text.size()}} : Spans{};
    };
    return Concat(left, spans_of(a, left), right, spans_of(b, right));
  }
  if (a_null || b_null) {
    if (op == "+" && (a.IsString() || b.IsString())) {
      return Copy(a_null ? b : a, budget);
    }
    Fail(line, absl::StrCat("cannot apply '", op, "' to ", a.TypeName(), " and ", b.TypeName()));
  }
  if (op == "<") return Value::Bool(ValueLess(a, b, line, budget));
  if (op == ">") return Value::Bool(ValueLess(b, a, line, budget));
  if (op == "<=") return Value::Bool(!ValueLess(b, a, line, budget));
  if (op == ">=") return Value::Bool(!ValueLess(a, b, line, budget));
  return Arithmetic(op, a, b, line, budget);
}

Value SliceOf(const Value& object, const int64_t parts[3], const bool given[3], int line,
              Budget& budget) {
  const int64_t step = parts[2];
  if (step == 0) Fail(line, "slice step cannot be zero");
  int64_t size;
  if (object.IsArray()) {
    size = static_cast<int64_t>(object.array->size());
  } else if (object.IsString()) {
    size = static_cast<int64_t>(object.s.size());
  } else {
    Fail(line, absl::StrCat("cannot slice ", object.TypeName()));
  }
  auto clamp = [&](int64_t v, bool is_given, int64_t fallback) {
    if (!is_given) return fallback;
    if (v < 0) v = v < -size ? -1 : v + size;  // no overflow for v near INT64_MIN
    if (step > 0) return std::clamp<int64_t>(v, 0, size);
    return std::clamp<int64_t>(v, -1, size - 1);
  };
  const int64_t start = clamp(parts[0], given[0], step > 0 ? 0 : size - 1);
  const int64_t stop = clamp(parts[1], given[1], step > 0 ? size : -1);
  // Items taken: ceil(|stop - start| / |step|) when start is before stop in step's direction.
  const int64_t span = step > 0 ? stop - start : start - stop;
  const int64_t stride =
      step > 0 ? step
               : (step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max()
                                                              : -step);
  const int64_t count = span <= 0 ? 0 : 1 + (span - 1) / stride;
  budget.Steps(static_cast<uint64_t>(count));
  Array items;
  std::string text;
  if (object.IsArray()) {
    budget.Bytes(kContainerBytes);
    budget.Bytes(static_cast<uint64_t>(count), sizeof(Value));
    items.reserve(static_cast<size_t>(count));
  } else {
    budget.Bytes(static_cast<uint64_t>(count));
    text.reserve(static_cast<size_t>(count));
  }
  for (int64_t n = 0; n < count; ++n) {
    const int64_t k = start + n * step;  // |n * step| < span: no overflow
    if (object.IsArray()) {
      items.push_back(Copy((*object.array)[k], budget));
    } else {
      text.push_back(object.s[k]);
    }
  }
  if (object.IsArray()) return Value::MakeArray(std::move(items));
  Value out = Value::Str(std::move(text));
  if (step == 1) {
    out.spans =
        SliceSpans(object.spans, static_cast<size_t>(start), static_cast<size_t>(start + count));
  } else if (!object.spans.empty()) {
    MarkWhole(&out);  // conservative: any content makes a strided slice content
  }
  return out;
}

}  // namespace pagoda::chat
