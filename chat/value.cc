#include "chat/value.h"

#include <cmath>
#include <cstdio>

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
Value Value::MakeArray(Array x) {
  Value v;
  v.kind = Kind::kArray;
  v.array = std::make_shared<Array>(std::move(x));
  return v;
}
Value Value::MakeObject(Object x) {
  Value v;
  v.kind = Kind::kObject;
  v.object = std::make_shared<Object>(std::move(x));
  return v;
}
Value Value::Func(Function fn) {
  Value v;
  v.kind = Kind::kFunction;
  v.function = std::make_shared<Function>(std::move(fn));
  return v;
}

Value Value::FromJson(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return None();
    case nlohmann::json::value_t::boolean:
      return Bool(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Int(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Int(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::json::value_t::number_float:
      return Float(j.get<double>());
    case nlohmann::json::value_t::string:
      return Str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(FromJson(e));
      return MakeArray(std::move(a));
    }
    case nlohmann::json::value_t::object: {
      Object o;
      for (const auto& [k, e] : j.items()) o.emplace_back(k, FromJson(e));
      return MakeObject(std::move(o));
    }
    default:
      return Value();
  }
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

void AppendJsonString(const std::string& s, std::string& out) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void AppendJson(const Value& v, int indent, int depth, const std::string& item_sep,
                const std::string& key_sep, std::string& out) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out.push_back('\n');
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.b ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += absl::StrCat(v.i);
      return;
    case Value::Kind::kFloat:
      out += FloatText(v.f);
      return;
    case Value::Kind::kString:
      AppendJsonString(v.s, out);
      return;
    case Value::Kind::kFunction:
      out += "null";
      return;
    case Value::Kind::kArray: {
      out.push_back('[');
      for (size_t k = 0; k < v.array->size(); ++k) {
        if (k > 0) out += item_sep;
        newline(depth + 1);
        AppendJson((*v.array)[k], indent, depth + 1, item_sep, key_sep, out);
      }
      if (!v.array->empty()) newline(depth);
      out.push_back(']');
      return;
    }
    case Value::Kind::kObject: {
      out.push_back('{');
      for (size_t k = 0; k < v.object->size(); ++k) {
        if (k > 0) out += item_sep;
        newline(depth + 1);
        AppendJsonString((*v.object)[k].first, out);
        out += key_sep;
        AppendJson((*v.object)[k].second, indent, depth + 1, item_sep, key_sep, out);
      }
      if (!v.object->empty()) newline(depth);
      out.push_back('}');
      return;
    }
  }
}

}  // namespace

std::string Value::ToString() const {
  switch (kind) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b ? "True" : "False";
    case Kind::kInt:
      return absl::StrCat(i);
    case Kind::kFloat:
      return FloatText(f);
    case Kind::kString:
      return s;
    case Kind::kArray: {
      std::string out = "[";
      for (size_t k = 0; k < array->size(); ++k) {
        if (k > 0) out += ", ";
        out += (*array)[k].Repr();
      }
      return out + "]";
    }
    case Kind::kObject: {
      std::string out = "{";
      for (size_t k = 0; k < object->size(); ++k) {
        if (k > 0) out += ", ";
        out += absl::StrCat("'", (*object)[k].first, "': ", (*object)[k].second.Repr());
      }
      return out + "}";
    }
    case Kind::kFunction:
      return "<function>";
  }
  return "";
}

std::string Value::Repr() const {
  if (kind == Kind::kString) return absl::StrCat("'", s, "'");
  return ToString();
}

std::string Value::ToJson(int indent, const std::string& item_sep,
                          const std::string& key_sep) const {
  std::string out;
  AppendJson(*this, indent, 0, item_sep, key_sep, out);
  return out;
}

const Value* Value::Find(const std::string& key) const {
  if (kind != Kind::kObject) return nullptr;
  for (const auto& [k, v] : *object) {
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

bool Equals(const Value& a, const Value& b) {
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
      return a.s == b.s;
    case Value::Kind::kArray:
      if (a.array->size() != b.array->size()) return false;
      for (size_t k = 0; k < a.array->size(); ++k) {
        if (!Equals((*a.array)[k], (*b.array)[k])) return false;
      }
      return true;
    case Value::Kind::kObject:
      if (a.object->size() != b.object->size()) return false;
      for (const auto& [k, v] : *a.object) {
        const Value* other = b.Find(k);
        if (other == nullptr || !Equals(v, *other)) return false;
      }
      return true;
    case Value::Kind::kFunction:
      return a.function == b.function;
    default:
      return false;
  }
}

}  // namespace pagoda::chat
