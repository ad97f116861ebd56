// A dynamically typed template value: what Jinja expressions evaluate to.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "chat/budget.h"

namespace pagoda::chat {

struct Value;
using Array = std::vector<Value>;
// Objects keep insertion order (Python dicts do, and templates print them).
using Object = std::vector<std::pair<std::string, Value>>;

// A byte range [begin, end) of a string.
struct Span {
  size_t begin = 0;
  size_t end = 0;
};
// Ranges of one string: sorted, disjoint, non-empty, never adjacent (chat/spans.h).
using Spans = std::vector<Span>;

// A string value's spans: none (a null pointer, the common case) or a list, copied with
// the value. One pointer wide, so that values (charged per slot to the render's byte
// budget) stay small.
class SpanList {
 public:
  SpanList() = default;
  SpanList(const SpanList& o) : p_(o.p_ ? std::make_unique<Spans>(*o.p_) : nullptr) {}
  SpanList(SpanList&&) = default;
  SpanList& operator=(const SpanList& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<Spans>(*o.p_) : nullptr;
    return *this;
  }
  SpanList& operator=(SpanList&&) = default;
  SpanList& operator=(Spans s) {
    p_ = s.empty() ? nullptr : std::make_unique<Spans>(std::move(s));
    return *this;
  }
  // The list (empty when none).
  operator const Spans&() const { return p_ ? *p_ : Empty(); }
  const Spans& get() const { return *this; }
  bool empty() const { return p_ == nullptr; }
  void clear() { p_.reset(); }

 private:
  static const Spans& Empty() {
    static const Spans* const kEmpty = new Spans();
    return *kEmpty;
  }
  std::unique_ptr<Spans> p_;
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A callable value (macros, global functions, bound methods); may throw TemplateError.
using Function = std::function<Value(CallArgs&)>;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Kind kind = Kind::kUndefined;
  bool b = false;
  // Lists and dicts nested in this value, itself included (0 for a scalar), as built;
  // saturates at 65535. A list changed in place (append) may hold deeper values since.
  uint16_t depth = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  // A string's bytes that came from the request's messages (content spans, chat/spans.h):
  // the tokenizer never reads special tokens there.
  SpanList spans;
  std::shared_ptr<Array> array;    // shared: appends through a method are visible
  std::shared_ptr<Object> object;  // shared: namespace attributes are assignable
  std::shared_ptr<Function> function;

  static Value None();
  static Value Bool(bool v);
  static Value Int(int64_t v);
  static Value Float(double v);
  static Value Str(std::string v);
  // Lists and dicts are destroyed without recursion, however deep they nest.
  static Value MakeArray(Array v = {});
  static Value MakeObject(Object v = {});
  static Value Func(Function fn);
  // Converts JSON (null, bool, number, string, array, object) to a value; throws
  // TemplateError("budget") when it nests deeper than the budget's max_depth.
  static Value FromJson(const nlohmann::json& j, const Budget& budget);
  // As above, objects keeping their keys in insertion order (what `tojson` then prints).
  static Value FromJson(const nlohmann::ordered_json& j, const Budget& budget);

  bool IsUndefined() const { return kind == Kind::kUndefined; }
  bool IsNone() const { return kind == Kind::kNone; }
  bool IsString() const { return kind == Kind::kString; }
  bool IsArray() const { return kind == Kind::kArray; }
  bool IsObject() const { return kind == Kind::kObject; }
  bool IsNumber() const { return kind == Kind::kInt || kind == Kind::kFloat; }

  // Python truthiness (undefined and none are false, empty containers false).
  bool Truthy() const;
  // The printing functions charge their steps, bytes and depth to `budget` and throw
  // TemplateError("budget") past it (a list that holds itself ends there too).
  // The text `{{ v }}` prints: undefined prints nothing, none prints "None".
  std::string ToString(Budget& budget) const;
  // Python repr-like text used inside printed containers ('a' for strings).
  std::string Repr(Budget& budget) const;
  // JSON text as Python's json.dumps with the given separators; indent < 0: one line.
  std::string ToJson(int64_t indent, const std::string& item_sep, const std::string& key_sep,
                     Budget& budget) const;
  // Looks up an object key (a linear search, charged); nullptr when absent or not an object.
  const Value* Find(const std::string& key, Budget& budget) const;
  // Name of the kind for error messages ("string", "array", ...).
  std::string TypeName() const;
};

// Python-style equality (1 == 1.0, deep for containers), charging `budget`.
bool Equals(const Value& a, const Value& b, Budget& budget);

// Bytes charged for each list or dict made, besides its items: the allocations' overhead.
inline constexpr uint64_t kContainerBytes = 64;

// A copy of `v` (a string's bytes are copied, lists and dicts shared), charged first.
Value Copy(const Value& v, Budget& budget);

// A copy of a list's items, charged first (its slots, each string's bytes, a step each).
Array CopyItems(const Array& items, Budget& budget);

}  // namespace pagoda::chat
