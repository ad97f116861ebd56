#include "chat/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagoda::chat {

Value Value::None() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::Bool(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::Int(int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::Float(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::Str(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::move(x);
  return v;
}

namespace {

// Lists and dicts die without recursion: a dying container hands the containers only it
// holds to a queue that the outermost deleter drains, so however deep a value nests (the
// budget bounds what is built, but lists changed in place can chain deeper) its
// destruction cannot overflow the stack.
struct Graveyard {
  std::vector<std::shared_ptr<void>> queue;
  bool draining = false;
};
thread_local Graveyard graveyard;

void Release(Value& v) {
  if (v.array != nullptr && v.array.use_count() == 1) graveyard.queue.push_back(std::move(v.array));
  if (v.object != nullptr && v.object.use_count() == 1) {
    graveyard.queue.push_back(std::move(v.object));
  }
}

void Drain() {
  if (graveyard.draining) return;
  graveyard.draining = true;
  while (!graveyard.queue.empty()) {
    std::shared_ptr<void> next = std::move(graveyard.queue.back());
    graveyard.queue.pop_back();
    next.reset();  // its own deleter queues its children
  }
  graveyard.draining = false;
}

void BuryArray(Array* a) {
  for (Value& v : *a) Release(v);
  delete a;
  Drain();
}

void BuryObject(Object* o) {
  for (auto& [k, v] : *o) Release(v);
  delete o;
  Drain();
}

uint16_t DepthAbove(int child_depth) {
  return static_cast<uint16_t>(std::min(child_depth + 1, 65535));
}

}  // namespace

Value Value::MakeArray(Array x) {
  Value v;
  v.kind = Kind::kArray;
  int deepest = 0;
  for (const Value& item : x) deepest = std::max<int>(deepest, item.depth);
  v.depth = DepthAbove(deepest);
  v.array = std::shared_ptr<Array>(new Array(std::move(x)), BuryArray);
  return v;
}
Value Value::MakeObject(Object x) {
  Value v;
  v.kind = Kind::kObject;
  int deepest = 0;
  for (const auto& [k, item] : x) deepest = std::max<int>(deepest, item.depth);
  v.depth = DepthAbove(deepest);
  v.object = std::shared_ptr<Object>(new Object(std::move(x)), BuryObject);
  return v;
}
Value Value::Func(Function fn) {
  Value v;
  v.kind = Kind::kFunction;
  v.function = std::make_shared<Function>(std::move(fn));
  return v;
}

namespace {

// For both key orders: json (sorted keys) and ordered_json (keys as inserted).
template <typename Json>
Value FromJsonAt(const Json& j, int depth, const Budget& budget) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::None();
    case nlohmann::json::value_t::boolean:
      return Value::Bool(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::Int(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Value::Int(static_cast<int64_t>(j.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float:
      return Value::Float(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::Str(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      budget.CheckDepth(depth + 1);
      Array a;
      for (const auto& e : j) a.push_back(FromJsonAt(e, depth + 1, budget));
      return Value::MakeArray(std::move(a));
    }
    case nlohmann::json::value_t::object: {
      budget.CheckDepth(depth + 1);
      Object o;
      for (const auto& [k, e] : j.items()) o.emplace_back(k, FromJsonAt(e, depth + 1, budget));
      return Value::MakeObject(std::move(o));
    }
    default:
      return Value();
  }
}

}  // namespace

Value Value::FromJson(const nlohmann::json& j, const Budget& budget) {
  return FromJsonAt(j, 0, budget);
}

Value Value::FromJson(const nlohmann::ordered_json& j, const Budget& budget) {
  return FromJsonAt(j, 0, budget);
}

bool Value::Truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b;
    case Kind::kInt:
      return i != 0;
    case Kind::kFloat:
      return f != 0.0;
    case Kind::kString:
      return !s.empty();
    case Kind::kArray:
      return !array->empty();
    case Kind::kObject:
      return !object->empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

namespace {

// Fixed six decimals with trailing zeros removed, keeping one ("2.5", "3.0").
std::string FloatText(double f) {
  std::string out = absl::StrFormat("%f", f);
  out.erase(out.find_last_not_of('0') + 1);
  if (!out.empty() && out.back() == '.') out.push_back('0');
  return out;
}

// Appends `piece` to `out`, charging its bytes first.
void Append(std::string_view piece, Budget& budget, std::string& out) {
  budget.Bytes(piece.size());
  out.append(piece);
}

void AppendJsonString(const std::string& s, Budget& budget, std::string& out) {
  budget.Scan(s.size());
  budget.Bytes(s.size() + 2);
  out.push_back('"');
  for (unsigned char c : s) {
    const char* escape = nullptr;
    switch (c) {
      case '"':
        escape = "\\\"";
        break;
      case '\\':
        escape = "\\\\";
        break;
      case '\n':
        escape = "\\n";
        break;
      case '\r':
        escape = "\\r";
        break;
      case '\t':
        escape = "\\t";
        break;
      case '\b':
        escape = "\\b";
        break;
      case '\f':
        escape = "\\f";
        break;
      default:
        break;
    }
    if (escape != nullptr) {
      budget.Bytes(1);
      out += escape;
    } else if (c < 0x20) {
      budget.Bytes(5);
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

struct JsonStyle {
  int64_t indent;  // < 0: one line
  const std::string& item_sep;
  const std::string& key_sep;
};

void AppendJson(const Value& v, const JsonStyle& style, int depth, Budget& budget,
                std::string& out) {
  budget.Steps(1);
  auto newline = [&](int d) {
    if (style.indent < 0) return;
    budget.Bytes(1);
    budget.Bytes(static_cast<uint64_t>(style.indent), static_cast<uint64_t>(d));
    out.push_back('\n');
    out.append(static_cast<size_t>(style.indent) * d, ' ');
  };
  switch (v.kind) {
    case Value::Kind::kString:
      AppendJsonString(v.s, budget, out);
      return;
    case Value::Kind::kArray: {
      budget.CheckDepth(depth + 1);
      Append("[", budget, out);
      for (size_t k = 0; k < v.array->size(); ++k) {
        if (k > 0) Append(style.item_sep, budget, out);
        newline(depth + 1);
        AppendJson((*v.array)[k], style, depth + 1, budget, out);
      }
      if (!v.array->empty()) newline(depth);
      Append("]", budget, out);
      return;
    }
    case Value::Kind::kObject: {
      budget.CheckDepth(depth + 1);
      Append("{", budget, out);
      for (size_t k = 0; k < v.object->size(); ++k) {
        if (k > 0) Append(style.item_sep, budget, out);
        newline(depth + 1);
        AppendJsonString((*v.object)[k].first, budget, out);
        Append(style.key_sep, budget, out);
        AppendJson((*v.object)[k].second, style, depth + 1, budget, out);
      }
      if (!v.object->empty()) newline(depth);
      Append("}", budget, out);
      return;
    }
    case Value::Kind::kBool:
      Append(v.b ? "true" : "false", budget, out);
      return;
    case Value::Kind::kInt:
      Append(absl::StrCat(v.i), budget, out);
      return;
    case Value::Kind::kFloat:
      Append(FloatText(v.f), budget, out);
      return;
    default:  // undefined, none, function
      Append("null", budget, out);
      return;
  }
}

// Appends the text `{{ v }}` prints (repr: as inside a printed container).
void AppendText(const Value& v, bool repr, int depth, Budget& budget, std::string& out) {
  budget.Steps(1);
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return;
    case Value::Kind::kNone:
      Append("None", budget, out);
      return;
    case Value::Kind::kBool:
      Append(v.b ? "True" : "False", budget, out);
      return;
    case Value::Kind::kInt:
      Append(absl::StrCat(v.i), budget, out);
      return;
    case Value::Kind::kFloat:
      Append(FloatText(v.f), budget, out);
      return;
    case Value::Kind::kString:
      if (repr) Append("'", budget, out);
      Append(v.s, budget, out);
      if (repr) Append("'", budget, out);
      return;
    case Value::Kind::kArray:
      budget.CheckDepth(depth + 1);
      Append("[", budget, out);
      for (size_t k = 0; k < v.array->size(); ++k) {
        if (k > 0) Append(", ", budget, out);
        AppendText((*v.array)[k], true, depth + 1, budget, out);
      }
      Append("]", budget, out);
      return;
    case Value::Kind::kObject:
      budget.CheckDepth(depth + 1);
      Append("{", budget, out);
      for (size_t k = 0; k < v.object->size(); ++k) {
        if (k > 0) Append(", ", budget, out);
        Append("'", budget, out);
        Append((*v.object)[k].first, budget, out);
        Append("': ", budget, out);
        AppendText((*v.object)[k].second, true, depth + 1, budget, out);
      }
      Append("}", budget, out);
      return;
    case Value::Kind::kFunction:
      Append("<function>", budget, out);
      return;
  }
}

bool EqualsAt(const Value& a, const Value& b, int depth, Budget& budget) {
  budget.Steps(1);
  if (a.IsNumber() && b.IsNumber()) {
    if (a.kind == Value::Kind::kInt && b.kind == Value::Kind::kInt) return a.i == b.i;
    double x = a.kind == Value::Kind::kInt ? static_cast<double>(a.i) : a.f;
    double y = b.kind == Value::Kind::kInt ? static_cast<double>(b.i) : b.f;
    return x == y;
  }
  if (a.kind == Value::Kind::kBool && b.kind == Value::Kind::kBool) return a.b == b.b;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      budget.Scan(std::min(a.s.size(), b.s.size()));
      return a.s == b.s;
    case Value::Kind::kArray:
      budget.CheckDepth(depth + 1);
      if (a.array->size() != b.array->size()) return false;
      for (size_t k = 0; k < a.array->size(); ++k) {
        if (!EqualsAt((*a.array)[k], (*b.array)[k], depth + 1, budget)) return false;
      }
      return true;
    case Value::Kind::kObject:
      budget.CheckDepth(depth + 1);
      if (a.object->size() != b.object->size()) return false;
      for (const auto& [k, v] : *a.object) {
        const Value* other = b.Find(k, budget);
        if (other == nullptr || !EqualsAt(v, *other, depth + 1, budget)) return false;
      }
      return true;
    case Value::Kind::kFunction:
      return a.function == b.function;
    default:
      return false;
  }
}

}  // namespace

std::string Value::ToString(Budget& budget) const {
  std::string out;
  AppendText(*this, false, 0, budget, out);
  return out;
}

std::string Value::Repr(Budget& budget) const {
  std::string out;
  AppendText(*this, true, 0, budget, out);
  return out;
}

std::string Value::ToJson(int64_t indent, const std::string& item_sep, const std::string& key_sep,
                          Budget& budget) const {
  std::string out;
  AppendJson(*this, JsonStyle{indent, item_sep, key_sep}, 0, budget, out);
  return out;
}

const Value* Value::Find(const std::string& key, Budget& budget) const {
  if (kind != Kind::kObject) return nullptr;
  budget.Steps(object->size());
  for (const auto& [k, v] : *object) {
    if (k.size() != key.size()) continue;
    budget.Scan(key.size());
    if (k == key) return &v;
  }
  return nullptr;
}

std::string Value::TypeName() const {
  switch (kind) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kArray:
      return "array";
    case Kind::kObject:
      return "object";
    case Kind::kFunction:
      return "function";
  }
  return "?";
}

bool Equals(const Value& a, const Value& b, Budget& budget) { return EqualsAt(a, b, 0, budget); }

Value Copy(const Value& v, Budget& budget) {
  if (v.IsString()) budget.Bytes(v.s.size());
  return v;
}

Array CopyItems(const Array& items, Budget& budget) {
  budget.Steps(items.size());
  budget.Bytes(kContainerBytes);
  budget.Bytes(items.size(), sizeof(Value));
  for (const Value& v : items) {
    if (v.IsString()) budget.Bytes(v.s.size());
  }
  return items;
}

}  // namespace pagoda::chat
