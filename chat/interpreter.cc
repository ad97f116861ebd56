#include "chat/interpreter.h"

#include <cmath>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "chat/builtins.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

using K = Value::Kind;
using Scope = std::unordered_map<std::string, Value>;

enum class Flow { kNormal, kBreak, kContinue };

constexpr int kMaxDepth = 200;                     // nested macro calls and loops
constexpr uint64_t kMaxStringBytes = 64ull << 20;  // one string or the whole output

class Interpreter {
 public:
  explicit Interpreter(const Value& globals) : globals_(globals) { scopes_.emplace_back(); }

  Flow ExecBlock(const std::vector<NodePtr>& body, std::string& out) {
    for (const NodePtr& n : body) {
      Flow f = Exec(*n, out);
      if (out.size() > kMaxStringBytes) Fail(*n, "rendered text too long");
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  [[noreturn]] static void Fail(const Node& n, const std::string& msg) {
    throw TemplateError("runtime", msg, n.line);
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
      if (it->count("\x01macro")) break;  // a macro body sees its own scope and the root
    }
    auto root = scopes_.front().find(name);
    if (root != scopes_.front().end()) return root->second;
    const Value* g = globals_.Find(name);
    return g ? *g : Value();
  }

  Flow Exec(const Node& n, std::string& out) {
    switch (n.kind) {
      case NodeKind::kText:
        out += n.str;
        return Flow::kNormal;
      case NodeKind::kOutput:
        out += Eval(*n.kids[0]).ToString();
        return Flow::kNormal;
      case NodeKind::kIf:
        return ExecBlock(Eval(*n.kids[0]).Truthy() ? n.body : n.else_body, out);
      case NodeKind::kFor:
        return ExecFor(n, out);
      case NodeKind::kSet:
        ExecSet(n);
        return Flow::kNormal;
      case NodeKind::kMacro:
        scopes_.back()[n.str] = MakeMacro(n);
        return Flow::kNormal;
      case NodeKind::kCallBlock:
        out += ExecCallBlock(n);
        return Flow::kNormal;
      case NodeKind::kFilterBlock: {
        std::string inner;
        ExecBlock(n.body, inner);
        const Node& f = *n.kids[0];
        out += ApplyFilter(f.str, Value::Str(inner), EvalArgs(f, 1), f.line).ToString();
        return Flow::kNormal;
      }
      case NodeKind::kBreak:
        return Flow::kBreak;
      case NodeKind::kContinue:
        return Flow::kContinue;
      default:
        Fail(n, "expression used as a statement");
    }
  }

  Flow ExecFor(const Node& n, std::string& out) {
    Value iterable = Eval(*n.kids[0]);
    Array items;
    if (iterable.IsArray()) {
      items = *iterable.array;
    } else if (iterable.IsObject()) {
      for (const auto& [k, v] : *iterable.object) items.push_back(Value::Str(k));
    } else if (iterable.IsString()) {
      for (char c : iterable.s) items.push_back(Value::Str(std::string(1, c)));
    } else if (!iterable.IsUndefined()) {
      Fail(n, absl::StrCat("cannot iterate over ", iterable.TypeName()));
    }
    scopes_.emplace_back();
    if (n.kids[1]) {  // {% for x in xs if cond %}: filter before counting
      Array kept;
      for (const Value& item : items) {
        Bind(n, item);
        if (Eval(*n.kids[1]).Truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const int64_t length = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < length; ++k) {
      Bind(n, items[k]);
      Object loop = {
          {"index", Value::Int(k + 1)},
          {"index0", Value::Int(k)},
          {"revindex", Value::Int(length - k)},
          {"revindex0", Value::Int(length - k - 1)},
          {"first", Value::Bool(k == 0)},
          {"last", Value::Bool(k == length - 1)},
          {"length", Value::Int(length)},
          {"previtem", k > 0 ? items[k - 1] : Value()},
          {"nextitem", k + 1 < length ? items[k + 1] : Value()},
      };
      scopes_.back()["loop"] = Value::MakeObject(std::move(loop));
      if (ExecBlock(n.body, out) == Flow::kBreak) break;
    }
    scopes_.pop_back();
    if (length == 0) return ExecBlock(n.else_body, out);
    return Flow::kNormal;
  }

  // Binds the loop variable(s) of `n` to `item`, unpacking pairs for `for a, b in ...`.
  void Bind(const Node& n, const Value& item) {
    if (n.names.size() == 1) {
      scopes_.back()[n.names[0]] = item;
      return;
    }
    if (!item.IsArray() || item.array->size() != n.names.size()) {
      Fail(n, absl::StrCat("cannot unpack ", item.TypeName(), " into ", n.names.size(), " names"));
    }
    for (size_t k = 0; k < n.names.size(); ++k) scopes_.back()[n.names[k]] = (*item.array)[k];
  }

  void ExecSet(const Node& n) {
    Value v;
    if (n.kids[1]) {
      v = Eval(*n.kids[1]);
    } else {
      std::string inner;
      ExecBlock(n.body, inner);
      v = Value::Str(inner);
    }
    Assign(*n.kids[0], v);
  }

  void Assign(const Node& target, const Value& v) {
    if (target.kind == NodeKind::kName) {
      scopes_.back()[target.str] = v;
    } else if (target.kind == NodeKind::kAttr) {
      Value object = Eval(*target.kids[0]);
      if (!object.IsObject()) Fail(target, "can only assign attributes of a namespace");
      for (auto& [k, slot] : *object.object) {
        if (k == target.str) {
          slot = v;
          return;
        }
      }
      object.object->emplace_back(target.str, v);
    } else if (target.kind == NodeKind::kList) {
      if (!v.IsArray() || v.array->size() != target.kids.size()) {
        Fail(target, "cannot unpack value in set");
      }
      for (size_t k = 0; k < target.kids.size(); ++k) Assign(*target.kids[k], (*v.array)[k]);
    } else {
      Fail(target, "invalid assignment target");
    }
  }

  // A macro as a function value; it renders its body in a fresh scope over the root.
  Value MakeMacro(const Node& n) {
    const Node* node = &n;
    return Value::Func([this, node](CallArgs& args) -> Value {
      Scope scope;
      scope["\x01macro"] = Value::Bool(true);
      for (size_t k = 0; k < node->names.size(); ++k) {
        Value v = GetArg(args, k, node->names[k].c_str());
        if (v.IsUndefined() && node->kids[k]) v = Eval(*node->kids[k]);
        scope[node->names[k]] = v;
      }
      for (const auto& [k, v] : args.keyword) {
        if (k == "caller") scope["caller"] = v;
      }
      if (args.positional.size() > node->names.size()) {
        Fail(*node, absl::StrCat("too many arguments to macro ", node->str));
      }
      if (scopes_.size() > kMaxDepth) Fail(*node, "macro recursion too deep");
      scopes_.push_back(std::move(scope));
      std::string out;
      ExecBlock(node->body, out);
      scopes_.pop_back();
      return Value::Str(out);
    });
  }

  std::string ExecCallBlock(const Node& n) {
    const Node& call = *n.kids[0];
    Value callee = Eval(*call.kids[0]);
    if (callee.kind != K::kFunction) Fail(n, "{% call %} of a non-macro");
    CallArgs args = EvalArgs(call, 1);
    const Node* body = &n;
    args.keyword.emplace_back("caller", Value::Func([this, body](CallArgs&) -> Value {
                                std::string out;
                                ExecBlock(body->body, out);
                                return Value::Str(out);
                              }));
    return (*callee.function)(args).ToString();
  }

  CallArgs EvalArgs(const Node& n, size_t first) {
    CallArgs args;
    size_t keywords = n.names.size();
    size_t positional_end = n.kids.size() - keywords;
    for (size_t k = first; k < positional_end; ++k) args.positional.push_back(Eval(*n.kids[k]));
    for (size_t k = 0; k < keywords; ++k) {
      args.keyword.emplace_back(n.names[k], Eval(*n.kids[positional_end + k]));
    }
    return args;
  }

  Value Eval(const Node& n) {
    switch (n.kind) {
      case NodeKind::kLiteral:
        return n.literal;
      case NodeKind::kName:
        return Lookup(n.str);
      case NodeKind::kList: {
        Array items;
        for (const NodePtr& k : n.kids) items.push_back(Eval(*k));
        return Value::MakeArray(std::move(items));
      }
      case NodeKind::kDict: {
        Object o;
        for (size_t k = 0; k + 1 < n.kids.size(); k += 2) {
          Value key = Eval(*n.kids[k]);
          if (!key.IsString()) {
            throw TemplateError("unsupported",
                                absl::StrCat("unsupported dict key of type ", key.TypeName()),
                                n.line);
          }
          o.emplace_back(key.s, Eval(*n.kids[k + 1]));
        }
        return Value::MakeObject(std::move(o));
      }
      case NodeKind::kAttr:
        return Member(n, Eval(*n.kids[0]), Value::Str(n.str), true);
      case NodeKind::kIndex:
        return Member(n, Eval(*n.kids[0]), Eval(*n.kids[1]), false);
      case NodeKind::kSlice:
        return EvalSlice(n);
      case NodeKind::kCall: {
        Value callee = Eval(*n.kids[0]);
        if (callee.IsUndefined() &&
            (n.kids[0]->kind == NodeKind::kAttr || n.kids[0]->kind == NodeKind::kName)) {
          throw TemplateError("unsupported",
                              absl::StrCat("unknown function or method '", n.kids[0]->str, "'"),
                              n.line);
        }
        if (callee.kind != K::kFunction) {
          Fail(n, absl::StrCat("call of a non-function (", callee.TypeName(), ")"));
        }
        CallArgs args = EvalArgs(n, 1);
        return (*callee.function)(args);
      }
      case NodeKind::kFilter:
        return ApplyFilter(n.str, Eval(*n.kids[0]), EvalArgs(n, 1), n.line);
      case NodeKind::kTest:
        return Value::Bool(ApplyTest(n.str, Eval(*n.kids[0]), EvalArgs(n, 1), n.line) != n.flag);
      case NodeKind::kUnary:
        return EvalUnary(n);
      case NodeKind::kBinary:
        return EvalBinary(n);
      case NodeKind::kCond:
        if (Eval(*n.kids[1]).Truthy()) return Eval(*n.kids[0]);
        return n.kids[2] ? Eval(*n.kids[2]) : Value();
      default:
        Fail(n, "statement used as an expression");
    }
  }

  // obj.name (attribute: methods first for strings/lists) and obj[key].
  Value Member(const Node& n, const Value& object, const Value& key, bool attribute) {
    if (object.IsUndefined() || key.IsUndefined()) return Value();
    if (object.IsObject()) {
      if (key.IsString()) {
        const Value* found = object.Find(key.s);
        if (found) return *found;
        return GetMethod(object, key.s, n.line);
      }
      return Value();
    }
    if (object.IsArray() || object.IsString()) {
      if (key.kind == K::kInt) {
        int64_t size = object.IsArray() ? static_cast<int64_t>(object.array->size())
                                        : static_cast<int64_t>(object.s.size());
        int64_t k = key.i < 0 ? key.i + size : key.i;
        if (k < 0 || k >= size) return Value();
        return object.IsArray() ? (*object.array)[k] : Value::Str(std::string(1, object.s[k]));
      }
      if (key.IsString()) return GetMethod(object, key.s, n.line);
      return Value();
    }
    if (object.IsNone()) {
      Fail(n, absl::StrCat("cannot get ", attribute ? "attribute '" : "item '", key.ToString(),
                           "' of None"));
    }
    return Value();
  }

  Value EvalSlice(const Node& n) {
    Value object = Eval(*n.kids[0]);
    int64_t parts[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!n.kids[k + 1]) continue;
      Value v = Eval(*n.kids[k + 1]);
      if (v.IsNone()) continue;
      if (v.kind != K::kInt) Fail(n, "slice bounds must be integers");
      parts[k] = v.i;
      given[k] = true;
    }
    int64_t step = parts[2];
    if (step == 0) Fail(n, "slice step cannot be zero");
    int64_t size;
    if (object.IsArray()) {
      size = static_cast<int64_t>(object.array->size());
    } else if (object.IsString()) {
      size = static_cast<int64_t>(object.s.size());
    } else {
      Fail(n, absl::StrCat("cannot slice ", object.TypeName()));
    }
    auto clamp = [&](int64_t v, bool is_given, int64_t fallback) {
      if (!is_given) return fallback;
      if (v < 0) v += size;
      if (step > 0) return std::clamp<int64_t>(v, 0, size);
      return std::clamp<int64_t>(v, -1, size - 1);
    };
    int64_t start = clamp(parts[0], given[0], step > 0 ? 0 : size - 1);
    int64_t stop = clamp(parts[1], given[1], step > 0 ? size : -1);
    Array items;
    std::string text;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (object.IsArray()) {
        items.push_back((*object.array)[k]);
      } else {
        text.push_back(object.s[k]);
      }
    }
    return object.IsArray() ? Value::MakeArray(std::move(items)) : Value::Str(std::move(text));
  }

  Value EvalUnary(const Node& n) {
    Value v = Eval(*n.kids[0]);
    if (n.str == "not") return Value::Bool(!v.Truthy());
    if (v.kind == K::kInt) return Value::Int(n.str == "-" ? -v.i : v.i);
    if (v.kind == K::kFloat) return Value::Float(n.str == "-" ? -v.f : v.f);
    Fail(n, absl::StrCat("unary ", n.str, " of ", v.TypeName()));
  }

  Value EvalBinary(const Node& n);
  Value Arithmetic(const Node& n, const Value& a, const Value& b);

  Value globals_;
  std::vector<Scope> scopes_;
};

double AsDouble(const Value& v) { return v.kind == K::kInt ? static_cast<double>(v.i) : v.f; }

Value Interpreter::EvalBinary(const Node& n) {
  const std::string& op = n.str;
  Value a = Eval(*n.kids[0]);
  if (op == "and") return a.Truthy() ? Eval(*n.kids[1]) : a;
  if (op == "or") return a.Truthy() ? a : Eval(*n.kids[1]);
  Value b = Eval(*n.kids[1]);
  if (op == "==") return Value::Bool(Equals(a, b));
  if (op == "!=") return Value::Bool(!Equals(a, b));
  if (op == "in") return Value::Bool(ValueIn(a, b, n.line));
  if (op == "not in") return Value::Bool(!ValueIn(a, b, n.line));
  bool a_null = a.IsUndefined() || a.IsNone();
  bool b_null = b.IsUndefined() || b.IsNone();
  if (op == "~") {
    // llama.cpp: none/undefined next to a string concatenates as empty.
    std::string left = a_null && b.IsString() ? "" : a.ToString();
    std::string right = b_null && a.IsString() ? "" : b.ToString();
    return Value::Str(left + right);
  }
  if (a_null || b_null) {
    if (op == "+" && (a.IsString() || b.IsString())) {
      return Value::Str((a_null ? "" : a.s) + (b_null ? "" : b.s));
    }
    Fail(n, absl::StrCat("cannot apply '", op, "' to ", a.TypeName(), " and ", b.TypeName()));
  }
  if (op == "<") return Value::Bool(ValueLess(a, b, n.line));
  if (op == ">") return Value::Bool(ValueLess(b, a, n.line));
  if (op == "<=") return Value::Bool(!ValueLess(b, a, n.line));
  if (op == ">=") return Value::Bool(!ValueLess(a, b, n.line));
  return Arithmetic(n, a, b);
}

Value Interpreter::Arithmetic(const Node& n, const Value& a, const Value& b) {
  const std::string& op = n.str;
  if (op == "+" && a.IsString() && b.IsString()) return Value::Str(a.s + b.s);
  if (op == "+" && a.IsArray() && b.IsArray()) {
    Array joined = *a.array;
    joined.insert(joined.end(), b.array->begin(), b.array->end());
    return Value::MakeArray(std::move(joined));
  }
  if (op == "*" && a.IsString() && b.kind == K::kInt) {
    if (b.i > 0 && a.s.size() * static_cast<uint64_t>(b.i) > kMaxStringBytes) {
      Fail(n, "string repetition too long");
    }
    std::string out;
    for (int64_t k = 0; k < b.i; ++k) out += a.s;
    return Value::Str(out);
  }
  if (!a.IsNumber() || !b.IsNumber()) {
    Fail(n, absl::StrCat("cannot apply '", op, "' to ", a.TypeName(), " and ", b.TypeName()));
  }
  bool ints = a.kind == K::kInt && b.kind == K::kInt;
  double x = AsDouble(a), y = AsDouble(b);
  if (op == "+") return ints ? Value::Int(a.i + b.i) : Value::Float(x + y);
  if (op == "-") return ints ? Value::Int(a.i - b.i) : Value::Float(x - y);
  if (op == "*") return ints ? Value::Int(a.i * b.i) : Value::Float(x * y);
  if (op == "**")
    return ints && b.i >= 0 ? Value::Int(static_cast<int64_t>(std::pow(x, y)))
                            : Value::Float(std::pow(x, y));
  if (y == 0) Fail(n, "division by zero");
  if (op == "/") return Value::Float(x / y);
  if (op == "//") {
    if (ints) {
      int64_t q = a.i / b.i;
      if ((a.i % b.i != 0) && ((a.i < 0) != (b.i < 0))) --q;
      return Value::Int(q);
    }
    return Value::Float(std::floor(x / y));
  }
  if (op == "%") {
    if (ints) {
      int64_t r = a.i % b.i;
      if (r != 0 && ((r < 0) != (b.i < 0))) r += b.i;
      return Value::Int(r);
    }
    return Value::Float(x - y * std::floor(x / y));
  }
  Fail(n, absl::StrCat("unsupported operator '", op, "'"));
}

}  // namespace

std::string Execute(const std::vector<NodePtr>& program, const Value& globals) {
  Interpreter interpreter(globals);
  std::string out;
  interpreter.ExecBlock(program, out);
  return out;
}

}  // namespace pagoda::chat
