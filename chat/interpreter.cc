#include "chat/interpreter.h"

#include <iterator>
#include <string_view>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/spans.h"

namespace pagoda::chat {
namespace {

using K = Value::Kind;
using Scope = std::unordered_map<std::string, Value>;

enum class Flow { kNormal, kBreak, kContinue };

// The keys of a for loop's `loop` object, in the order UpdateLoop writes them.
constexpr const char* kLoopKeys[] = {"index", "index0", "revindex", "revindex0", "first",
                                     "last",  "length", "previtem", "nextitem"};

class Interpreter {
 public:
  Interpreter(const Value& globals, Budget& budget) : globals_(globals), budget_(budget) {
    scopes_.emplace_back();
  }

  Flow ExecBlock(const std::vector<NodePtr>& body, SpannedText& out) {
    for (const NodePtr& n : body) {
      Flow f = Exec(*n, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  [[noreturn]] static void Fail(const Node& n, const std::string& msg) {
    throw TemplateError("runtime", msg, n.line);
  }

  // Appends to the output, charging the bytes first: template text, or a value's text
  // with its content spans (a non-string holding content is content as a whole).
  void Emit(std::string_view text, SpannedText& out) {
    budget_.Bytes(text.size());
    out.Append(text);
  }
  void EmitValue(const Value& v, SpannedText& out) {
    if (v.IsString()) {
      budget_.Bytes(v.s.size());
      return out.Append(v);
    }
    std::string printed = v.ToString(budget_);
    budget_.Bytes(printed.size());
    out.AppendPrinted(printed, HasContent(v, budget_));
  }

  // The innermost scope's variable `name` (hashing the name is charged).
  Value& Slot(const std::string& name) {
    budget_.Scan(name.size());
    return scopes_.back()[name];
  }

  Value Lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      budget_.Scan(name.size());
      auto found = it->find(name);
      if (found != it->end()) return Copy(found->second, budget_);
      if (it->count("\x01macro")) break;  // a macro body sees its own scope and the root
    }
    auto root = scopes_.front().find(name);
    if (root != scopes_.front().end()) return Copy(root->second, budget_);
    const Value* g = globals_.Find(name, budget_);
    return g ? Copy(*g, budget_) : Value();
  }

  Flow Exec(const Node& n, SpannedText& out) {
    budget_.Steps(1);
    Budget::Nest nest(budget_);
    switch (n.kind) {
      case NodeKind::kText:
        Emit(n.str, out);
        return Flow::kNormal;
      case NodeKind::kOutput:
        EmitValue(Eval(*n.kids[0]), out);
        return Flow::kNormal;
      case NodeKind::kIf:
        return ExecBlock(Eval(*n.kids[0]).Truthy() ? n.body : n.else_body, out);
      case NodeKind::kFor:
        return ExecFor(n, out);
      case NodeKind::kSet:
        ExecSet(n);
        return Flow::kNormal;
      case NodeKind::kMacro:
        budget_.Bytes(kContainerBytes);
        Slot(n.str) = MakeMacro(n);
        return Flow::kNormal;
      case NodeKind::kCallBlock:
        EmitValue(ExecCallBlock(n), out);
        return Flow::kNormal;
      case NodeKind::kFilterBlock: {
        SpannedText inner;
        ExecBlock(n.body, inner);
        const Node& f = *n.kids[0];
        EmitValue(ApplyFilter(f.str, inner.Take(), EvalArgs(f, 1), f.line, budget_), out);
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

  // The items a for loop walks (a copy, charged): list items, dict keys, characters.
  Array LoopItems(const Node& n, const Value& iterable) {
    if (iterable.IsArray()) return CopyItems(*iterable.array, budget_);
    if (iterable.IsUndefined()) return {};
    if (!iterable.IsObject() && !iterable.IsString()) {
      Fail(n, absl::StrCat("cannot iterate over ", iterable.TypeName()));
    }
    Value list = ApplyFilter("list", iterable, CallArgs(), n.line, budget_);
    return std::move(*list.array);
  }

  // Small frame: a for loop nests inside statements as deep as max_nesting allows, so
  // its set-up and each iteration's bindings live in helpers that are not inlined.
  Flow ExecFor(const Node& n, SpannedText& out) {
    scopes_.emplace_back();
    Array items = ForItems(n);
    std::shared_ptr<Object> loop = NewLoop();
    for (size_t k = 0; k < items.size(); ++k) {
      budget_.Steps(1);
      StartIteration(n, loop, items, k);
      if (ExecBlock(n.body, out) == Flow::kBreak) break;
    }
    scopes_.pop_back();
    if (items.empty()) return ExecBlock(n.else_body, out);
    return Flow::kNormal;
  }

  // What `n` iterates over, after its `if` filter; in the loop's new scope.
  [[gnu::noinline]] Array ForItems(const Node& n) {
    Value iterable = Eval(*n.kids[0]);
    // A list only this loop holds (range(n), a filter's result) is taken, not copied.
    Array items = iterable.IsArray() && iterable.array.use_count() == 1 ? std::move(*iterable.array)
                                                                        : LoopItems(n, iterable);
    if (!n.kids[1]) return items;
    Array kept;  // {% for x in xs if cond %}: filter before counting
    for (Value& item : items) {
      Bind(n, item);
      if (Eval(*n.kids[1]).Truthy()) kept.push_back(std::move(item));
    }
    return kept;
  }

  // One `loop` object per loop, updated in place for each item.
  [[gnu::noinline]] std::shared_ptr<Object> NewLoop() {
    budget_.Bytes(kContainerBytes);
    budget_.Bytes(std::size(kLoopKeys), sizeof(std::pair<std::string, Value>));
    Object fields;
    for (const char* key : kLoopKeys) fields.emplace_back(key, Value());
    return Value::MakeObject(std::move(fields)).object;
  }

  [[gnu::noinline]] void StartIteration(const Node& n, const std::shared_ptr<Object>& object,
                                        const Array& items, size_t k) {
    Value loop;
    loop.kind = K::kObject;
    loop.object = object;
    Bind(n, items[k]);
    UpdateLoop(n, loop, items, k);
    Slot("loop") = std::move(loop);
  }

  void UpdateLoop(const Node& n, const Value& loop, const Array& items, size_t at) {
    const int64_t k = static_cast<int64_t>(at);
    const int64_t length = static_cast<int64_t>(items.size());
    Object& o = *loop.object;
    o[0].second = Value::Int(k + 1);
    o[1].second = Value::Int(k);
    o[2].second = Value::Int(length - k);
    o[3].second = Value::Int(length - k - 1);
    o[4].second = Value::Bool(k == 0);
    o[5].second = Value::Bool(k == length - 1);
    o[6].second = Value::Int(length);
    o[7].second = Value();
    o[8].second = Value();
    // An item that holds this loop object would make a cycle: CheckInsert refuses it.
    if (k > 0) {
      CheckInsert(loop, items[at - 1], n.line, budget_);
      o[7].second = Copy(items[at - 1], budget_);
    }
    if (k + 1 < length) {
      CheckInsert(loop, items[at + 1], n.line, budget_);
      o[8].second = Copy(items[at + 1], budget_);
    }
  }

  // Binds the loop variable(s) of `n` to `item`, unpacking pairs for `for a, b in ...`.
  void Bind(const Node& n, const Value& item) {
    if (n.names.size() == 1) {
      Slot(n.names[0]) = Copy(item, budget_);
      return;
    }
    if (!item.IsArray() || item.array->size() != n.names.size()) {
      Fail(n, absl::StrCat("cannot unpack ", item.TypeName(), " into ", n.names.size(), " names"));
    }
    for (size_t k = 0; k < n.names.size(); ++k) {
      Slot(n.names[k]) = Copy((*item.array)[k], budget_);
    }
  }

  void ExecSet(const Node& n) {
    Value v;
    if (n.kids[1]) {
      v = Eval(*n.kids[1]);
    } else {
      SpannedText inner;
      ExecBlock(n.body, inner);
      v = inner.Take();
    }
    Assign(*n.kids[0], std::move(v));
  }

  void Assign(const Node& target, Value v) {
    if (target.kind == NodeKind::kName) {
      Slot(target.str) = std::move(v);
    } else if (target.kind == NodeKind::kAttr) {
      Value object = Eval(*target.kids[0]);
      if (!object.IsObject()) Fail(target, "can only assign attributes of a namespace");
      SetKey(object, target.str, v, target.line, budget_);
    } else if (target.kind == NodeKind::kList) {
      if (!v.IsArray() || v.array->size() != target.kids.size()) {
        Fail(target, "cannot unpack value in set");
      }
      for (size_t k = 0; k < target.kids.size(); ++k) {
        Assign(*target.kids[k], Copy((*v.array)[k], budget_));
      }
    } else {
      Fail(target, "invalid assignment target");
    }
  }

  // A macro as a function value; it renders its body in a fresh scope over the root.
  Value MakeMacro(const Node& n) {
    const Node* node = &n;
    return Value::Func([this, node](CallArgs& args) -> Value {
      Budget::Call call(budget_);
      if (args.positional.size() > node->names.size()) {
        Fail(*node, absl::StrCat("too many arguments to macro ", node->str));
      }
      Scope scope;
      scope["\x01macro"] = Value::Bool(true);
      for (size_t k = 0; k < node->names.size(); ++k) {
        // GetArg's search, and a new entry of the scope (hash, allocation): three steps.
        budget_.Steps(3 + args.keyword.size());
        budget_.Scan(node->names[k].size());
        Value v = Copy(GetArg(args, k, node->names[k].c_str()), budget_);
        if (v.IsUndefined() && node->kids[k]) v = Eval(*node->kids[k]);
        scope[node->names[k]] = std::move(v);
      }
      for (const auto& [k, v] : args.keyword) {
        if (k == "caller") scope["caller"] = v;
      }
      scopes_.push_back(std::move(scope));
      SpannedText out;
      ExecBlock(node->body, out);
      scopes_.pop_back();
      return out.Take();
    });
  }

  Value ExecCallBlock(const Node& n) {
    const Node& call = *n.kids[0];
    Value callee = Eval(*call.kids[0]);
    if (callee.kind != K::kFunction) Fail(n, "{% call %} of a non-macro");
    CallArgs args = EvalArgs(call, 1);
    const Node* body = &n;
    budget_.Bytes(kContainerBytes);
    args.keyword.emplace_back("caller", Value::Func([this, body](CallArgs&) -> Value {
                                Budget::Call call(budget_);
                                SpannedText out;
                                ExecBlock(body->body, out);
                                return out.Take();
                              }));
    budget_.Steps(1);
    return (*callee.function)(args);
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

  // Every expression: one step, and its value nests at most max_depth deep.
  Value Eval(const Node& n) {
    budget_.Steps(1);
    Budget::Nest nest(budget_);
    Value v = EvalNode(n);
    budget_.CheckDepth(v.depth);
    return v;
  }

  Value EvalNode(const Node& n) {
    switch (n.kind) {
      case NodeKind::kLiteral:
        return Copy(n.literal, budget_);
      case NodeKind::kName:
        return Lookup(n.str);
      case NodeKind::kList: {
        budget_.Bytes(kContainerBytes);
        budget_.Bytes(n.kids.size(), sizeof(Value));
        Array items;
        for (const NodePtr& k : n.kids) items.push_back(Eval(*k));
        return Value::MakeArray(std::move(items));
      }
      case NodeKind::kDict:
        return EvalDict(n);
      case NodeKind::kAttr:
        return Member(n, Eval(*n.kids[0]), AttrName(n), true);
      case NodeKind::kIndex:
        return Member(n, Eval(*n.kids[0]), Eval(*n.kids[1]), false);
      case NodeKind::kSlice:
        return EvalSlice(n);
      case NodeKind::kCall:
        return EvalCall(n);
      case NodeKind::kFilter:
        return ApplyFilter(n.str, Eval(*n.kids[0]), EvalArgs(n, 1), n.line, budget_);
      case NodeKind::kTest:
        return Value::Bool(ApplyTest(n.str, Eval(*n.kids[0]), EvalArgs(n, 1), n.line, budget_) !=
                           n.flag);
      case NodeKind::kUnary:
        return EvalUnary(n);
      case NodeKind::kBinary: {
        const std::string& op = n.str;
        Value a = Eval(*n.kids[0]);
        if (op == "and") return a.Truthy() ? Eval(*n.kids[1]) : a;
        if (op == "or") return a.Truthy() ? a : Eval(*n.kids[1]);
        return BinaryOp(op, a, Eval(*n.kids[1]), n.line, budget_);
      }
      case NodeKind::kCond:
        if (Eval(*n.kids[1]).Truthy()) return Eval(*n.kids[0]);
        return n.kids[2] ? Eval(*n.kids[2]) : Value();
      default:
        Fail(n, "statement used as an expression");
    }
  }

  Value EvalDict(const Node& n) {
    budget_.Bytes(kContainerBytes);
    budget_.Bytes(n.kids.size() / 2, sizeof(std::pair<std::string, Value>));
    Object o;
    for (size_t k = 0; k + 1 < n.kids.size(); k += 2) {
      Value key = Eval(*n.kids[k]);
      if (!key.IsString()) {
        throw TemplateError("unsupported",
                            absl::StrCat("unsupported dict key of type ", key.TypeName()), n.line);
      }
      o.emplace_back(std::move(key.s), Eval(*n.kids[k + 1]));
    }
    return Value::MakeObject(std::move(o));
  }

  // f(args), or receiver.method(args) with the receiver alive during the call.
  Value EvalCall(const Node& n) {
    const Node& target = *n.kids[0];
    Value receiver;
    Value callee;
    if (target.kind == NodeKind::kAttr) {
      receiver = Eval(*target.kids[0]);
      bool own_key = receiver.IsObject() && receiver.Find(target.str, budget_) != nullptr;
      if (!own_key && HasMethod(receiver.kind, target.str)) {
        CallArgs args = EvalArgs(n, 1);
        return CallMethod(receiver, target.str, args, n.line, budget_);
      }
      callee = Member(target, receiver, AttrName(target), true);
    } else {
      callee = Eval(target);
    }
    if (callee.IsUndefined() &&
        (target.kind == NodeKind::kAttr || target.kind == NodeKind::kName)) {
      throw TemplateError("unsupported",
                          absl::StrCat("unknown function or method '", target.str, "'"), n.line);
    }
    if (callee.kind != K::kFunction) {
      Fail(n, absl::StrCat("call of a non-function (", callee.TypeName(), ")"));
    }
    CallArgs args = EvalArgs(n, 1);
    budget_.Steps(1);
    return (*callee.function)(args);
  }

  // The name of an attribute node as a string value, charged.
  Value AttrName(const Node& n) {
    budget_.Bytes(n.str.size());
    return Value::Str(n.str);
  }

  // obj.name (attribute: methods first for strings/lists) and obj[key].
  Value Member(const Node& n, const Value& object, const Value& key, bool attribute) {
    if (object.IsUndefined() || key.IsUndefined()) return Value();
    if (object.IsObject()) {
      if (key.IsString()) {
        const Value* found = object.Find(key.s, budget_);
        if (found) return Copy(*found, budget_);
        return GetMethod(object, key.s, n.line, budget_);
      }
      return Value();
    }
    if (object.IsArray() || object.IsString()) {
      if (key.kind == K::kInt) {
        int64_t size = object.IsArray() ? static_cast<int64_t>(object.array->size())
                                        : static_cast<int64_t>(object.s.size());
        int64_t k = key.i < 0 ? key.i + size : key.i;
        if (k < 0 || k >= size) return Value();
        return object.IsArray()
                   ? Copy((*object.array)[k], budget_)
                   : SpannedStr(std::string(1, object.s[k]), SliceSpans(object.spans, k, k + 1));
      }
      if (key.IsString()) return GetMethod(object, key.s, n.line, budget_);
      return Value();
    }
    if (object.IsNone()) {
      Fail(n, absl::StrCat("cannot get ", attribute ? "attribute '" : "item '",
                           key.ToString(budget_), "' of None"));
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
    return SliceOf(object, parts, given, n.line, budget_);
  }

  Value EvalUnary(const Node& n) {
    Value v = Eval(*n.kids[0]);
    if (n.str == "not") return Value::Bool(!v.Truthy());
    if (v.kind == K::kInt) {
      if (n.str == "-" && v.i == INT64_MIN) Fail(n, "integer overflow in unary -");
      return Value::Int(n.str == "-" ? -v.i : v.i);
    }
    if (v.kind == K::kFloat) return Value::Float(n.str == "-" ? -v.f : v.f);
    Fail(n, absl::StrCat("unary ", n.str, " of ", v.TypeName()));
  }

  Value globals_;
  Budget& budget_;
  std::vector<Scope> scopes_;
};

}  // namespace

SpannedText Execute(const std::vector<NodePtr>& program, const Value& globals, Budget& budget) {
  Interpreter interpreter(globals, budget);
  SpannedText out;
  interpreter.ExecBlock(program, out);
  return out;
}

}  // namespace pagoda::chat
