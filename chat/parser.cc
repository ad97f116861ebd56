#include "chat/parser.h"

#include <initializer_list>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

using TK = Token::Kind;

NodePtr MakeNode(NodeKind kind, int line) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  return n;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  std::vector<NodePtr> ParseAll() {
    std::vector<NodePtr> out = ParseBlock({});
    if (Peek().kind != TK::kEnd) Fail(absl::StrCat("unexpected {% ", Peek(1).text, " %}"));
    return out;
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    size_t k = std::min(pos_ + ahead, t_.size() - 1);
    return t_[k];
  }
  const Token& Next() {
    const Token& tok = t_[pos_];
    if (pos_ + 1 < t_.size()) ++pos_;
    return tok;
  }
  [[noreturn]] void Fail(const std::string& msg) const {
    throw TemplateError("syntax", msg, Peek().line);
  }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).kind == TK::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).kind == TK::kName && Peek(ahead).text == name;
  }
  void ExpectOp(const char* op) {
    if (!IsOp(op)) Fail(absl::StrCat("expected '", op, "', found '", Peek().text, "'"));
    Next();
  }
  std::string ExpectName() {
    if (Peek().kind != TK::kName) Fail(absl::StrCat("expected a name, found '", Peek().text, "'"));
    return Next().text;
  }
  void ExpectKind(TK kind, const char* what) {
    if (Peek().kind != kind) Fail(absl::StrCat("expected ", what));
    Next();
  }

  // True at `{% name` for any of the names.
  bool AtStatement(std::initializer_list<const char*> names) const {
    if (Peek().kind != TK::kOpenStmt) return false;
    for (const char* n : names) {
      if (IsName(n, 1)) return true;
    }
    return false;
  }

  // Statements until `{% end %}` for one of the names (not consumed) or the end.
  std::vector<NodePtr> ParseBlock(std::initializer_list<const char*> ends) {
    std::vector<NodePtr> out;
    while (Peek().kind != TK::kEnd) {
      if (ends.size() > 0 && AtStatement(ends)) return out;
      const Token& tok = Peek();
      if (tok.kind == TK::kText) {
        auto n = MakeNode(NodeKind::kText, tok.line);
        n->str = Next().text;
        out.push_back(std::move(n));
      } else if (tok.kind == TK::kOpenExpr) {
        auto n = MakeNode(NodeKind::kOutput, Next().line);
        n->kids.push_back(ParseExpression());
        ExpectKind(TK::kCloseExpr, "}}");
        out.push_back(std::move(n));
      } else if (tok.kind == TK::kOpenStmt) {
        if (ends.size() == 0 && Peek(1).kind == TK::kName &&
            (Peek(1).text.rfind("end", 0) == 0 || Peek(1).text == "else" ||
             Peek(1).text == "elif")) {
          Fail(absl::StrCat("unexpected {% ", Peek(1).text, " %}"));
        }
        NodePtr n = ParseStatement();
        if (n) out.push_back(std::move(n));
      } else {
        Fail(absl::StrCat("unexpected token '", tok.text, "'"));
      }
    }
    if (ends.size() > 0) Fail(absl::StrCat("missing {% ", *ends.begin(), " %}"));
    return out;
  }

  // `{% name %}` exactly.
  void ExpectStatement(const char* name) {
    ExpectKind(TK::kOpenStmt, "{%");
    if (!IsName(name)) Fail(absl::StrCat("expected {% ", name, " %}"));
    Next();
    ExpectKind(TK::kCloseStmt, "%}");
  }

  NodePtr ParseStatement() {
    DepthGuard guard(this);
    Next();  // {%
    int line = Peek().line;
    std::string word = ExpectName();
    NodePtr n;
    if (word == "if") {
      n = ParseIf(line);
      ExpectStatement("endif");
      return n;
    }
    if (word == "for") return ParseFor(line);
    if (word == "set") return ParseSet(line);
    if (word == "macro") return ParseMacro(line);
    if (word == "call") return ParseCallBlock(line);
    if (word == "filter") return ParseFilterBlock(line);
    if (word == "break" || word == "continue") {
      n = MakeNode(word == "break" ? NodeKind::kBreak : NodeKind::kContinue, line);
      ExpectKind(TK::kCloseStmt, "%}");
      return n;
    }
    if (word == "generation" || word == "endgeneration") {  // HF training markers: no output
      ExpectKind(TK::kCloseStmt, "%}");
      return nullptr;
    }
    throw TemplateError("unsupported", absl::StrCat("unsupported statement {% ", word, " %}"),
                        line);
  }

  // After `if`: condition, body, elif/else chain; stops before {% endif %}.
  NodePtr ParseIf(int line) {
    auto n = MakeNode(NodeKind::kIf, line);
    n->kids.push_back(ParseExpression());
    ExpectKind(TK::kCloseStmt, "%}");
    n->body = ParseBlock({"elif", "else", "endif"});
    if (AtStatement({"elif"})) {
      Next();
      int elif_line = Next().line;
      n->else_body.push_back(ParseIf(elif_line));
    } else if (AtStatement({"else"})) {
      Next();
      Next();
      ExpectKind(TK::kCloseStmt, "%}");
      n->else_body = ParseBlock({"endif"});
    }
    return n;
  }

  NodePtr ParseFor(int line) {
    auto n = MakeNode(NodeKind::kFor, line);
    bool paren = IsOp("(");
    if (paren) Next();
    n->names.push_back(ExpectName());
    while (IsOp(",")) {
      Next();
      n->names.push_back(ExpectName());
    }
    if (paren) ExpectOp(")");
    if (!IsName("in")) Fail("expected 'in' in for loop");
    Next();
    n->kids.push_back(ParseOr());  // not a conditional: `if` here filters the loop
    if (IsName("if")) {
      Next();
      n->kids.push_back(ParseExpression());
    } else {
      n->kids.push_back(nullptr);
    }
    if (IsName("recursive")) {
      throw TemplateError("unsupported", "unsupported recursive for loop", line);
    }
    ExpectKind(TK::kCloseStmt, "%}");
    n->body = ParseBlock({"endfor", "else"});
    if (AtStatement({"else"})) {
      Next();
      Next();
      ExpectKind(TK::kCloseStmt, "%}");
      n->else_body = ParseBlock({"endfor"});
    }
    ExpectStatement("endfor");
    return n;
  }

  NodePtr ParseSet(int line) {
    auto n = MakeNode(NodeKind::kSet, line);
    NodePtr target = ParsePrimaryWithPostfix();
    if (IsOp(",")) {
      auto list = MakeNode(NodeKind::kList, line);
      list->kids.push_back(std::move(target));
      while (IsOp(",")) {
        Next();
        list->kids.push_back(ParsePrimaryWithPostfix());
      }
      target = std::move(list);
    }
    n->kids.push_back(std::move(target));
    if (IsOp("=")) {
      Next();
      n->kids.push_back(ParseExpressionOrTuple());
      ExpectKind(TK::kCloseStmt, "%}");
      return n;
    }
    ExpectKind(TK::kCloseStmt, "%}");  // block set: {% set x %}...{% endset %}
    n->kids.push_back(nullptr);
    n->body = ParseBlock({"endset"});
    ExpectStatement("endset");
    return n;
  }

  NodePtr ParseMacro(int line) {
    auto n = MakeNode(NodeKind::kMacro, line);
    n->str = ExpectName();
    ExpectOp("(");
    while (!IsOp(")")) {
      n->names.push_back(ExpectName());
      if (IsOp("=")) {
        Next();
        n->kids.push_back(ParseExpression());
      } else {
        n->kids.push_back(nullptr);
      }
      if (!IsOp(")")) ExpectOp(",");
    }
    Next();
    ExpectKind(TK::kCloseStmt, "%}");
    n->body = ParseBlock({"endmacro"});
    ExpectStatement("endmacro");
    return n;
  }

  NodePtr ParseCallBlock(int line) {
    auto n = MakeNode(NodeKind::kCallBlock, line);
    if (IsOp("(")) throw TemplateError("unsupported", "unsupported call block arguments", line);
    NodePtr call = ParseExpression();
    if (call->kind != NodeKind::kCall) Fail("expected a macro call after {% call");
    n->kids.push_back(std::move(call));
    ExpectKind(TK::kCloseStmt, "%}");
    n->body = ParseBlock({"endcall"});
    ExpectStatement("endcall");
    return n;
  }

  NodePtr ParseFilterBlock(int line) {
    auto n = MakeNode(NodeKind::kFilterBlock, line);
    n->kids.push_back(ParseFilterTail(nullptr));
    ExpectKind(TK::kCloseStmt, "%}");
    n->body = ParseBlock({"endfilter"});
    ExpectStatement("endfilter");
    return n;
  }

  // ---- Expressions, lowest precedence first.

  NodePtr ParseExpressionOrTuple() {
    NodePtr first = ParseExpression();
    if (!IsOp(",")) return first;
    auto list = MakeNode(NodeKind::kList, first->line);
    list->kids.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      list->kids.push_back(ParseExpression());
    }
    return list;
  }

  NodePtr ParseExpression() {
    DepthGuard guard(this);
    NodePtr value = ParseOr();
    if (!IsName("if")) return value;
    auto n = MakeNode(NodeKind::kCond, Next().line);
    n->kids.push_back(std::move(value));
    n->kids.push_back(ParseOr());
    if (IsName("else")) {
      Next();
      n->kids.push_back(ParseExpression());
    } else {
      n->kids.push_back(nullptr);
    }
    return n;
  }

  NodePtr Binary(std::string op, NodePtr left, NodePtr right) {
    Deeper();
    auto n = MakeNode(NodeKind::kBinary, left->line);
    n->str = std::move(op);
    n->kids.push_back(std::move(left));
    n->kids.push_back(std::move(right));
    return n;
  }

  NodePtr ParseOr() {
    NodePtr left = ParseAnd();
    while (IsName("or")) {
      Next();
      left = Binary("or", std::move(left), ParseAnd());
    }
    return left;
  }

  NodePtr ParseAnd() {
    NodePtr left = ParseNot();
    while (IsName("and")) {
      Next();
      left = Binary("and", std::move(left), ParseNot());
    }
    return left;
  }

  NodePtr ParseNot() {
    if (!IsName("not")) return ParseCompare();
    auto n = MakeNode(NodeKind::kUnary, Next().line);
    n->str = "not";
    n->kids.push_back(ParseNot());
    return n;
  }

  NodePtr ParseCompare() {
    NodePtr left = ParseAdd();
    while (true) {
      std::string op;
      if (Peek().kind == TK::kOp &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" || Peek().text == ">" ||
           Peek().text == "<=" || Peek().text == ">=")) {
        op = Next().text;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "not in";
      } else {
        return left;
      }
      left = Binary(op, std::move(left), ParseAdd());
    }
  }

  NodePtr ParseAdd() {
    NodePtr left = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      std::string op = Next().text;
      left = Binary(op, std::move(left), ParseConcat());
    }
    return left;
  }

  NodePtr ParseConcat() {
    NodePtr left = ParseMul();
    while (IsOp("~")) {
      Next();
      left = Binary("~", std::move(left), ParseMul());
    }
    return left;
  }

  NodePtr ParseMul() {
    NodePtr left = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Next().text;
      left = Binary(op, std::move(left), ParsePow());
    }
    return left;
  }

  NodePtr ParsePow() {
    NodePtr left = ParseUnary(true);
    while (IsOp("**")) {
      Next();
      left = Binary("**", std::move(left), ParseUnary(true));
    }
    return left;
  }

  NodePtr ParseUnary(bool with_filter) {
    DepthGuard guard(this);
    NodePtr n;
    if (IsOp("-") || IsOp("+")) {
      n = MakeNode(NodeKind::kUnary, Peek().line);
      n->str = Next().text;
      n->kids.push_back(ParseUnary(false));
    } else {
      n = ParsePrimaryWithPostfix();
    }
    if (!with_filter) return n;
    return ParseFilterTail(std::move(n));
  }

  // Filters (`| name(args)`) and tests (`is [not] name args`) after an operand.
  NodePtr ParseFilterTail(NodePtr n) {
    bool first_bare = n == nullptr;  // filter block: the first filter has no `|`
    while (first_bare || IsOp("|") || IsName("is")) {
      Deeper();
      if (first_bare || IsOp("|")) {
        int line = first_bare ? Peek().line : Next().line;
        first_bare = false;
        auto f = MakeNode(NodeKind::kFilter, line);
        f->str = ExpectName();
        f->kids.push_back(std::move(n));
        if (IsOp("(")) ParseArgs(*f);
        n = std::move(f);
        continue;
      }
      auto t = MakeNode(NodeKind::kTest, Next().line);
      if (IsName("not")) {
        Next();
        t->flag = true;
      }
      t->str = ExpectName();
      t->kids.push_back(std::move(n));
      if (IsOp("(")) {
        ParseArgs(*t);
      } else if (Peek().kind == TK::kString || Peek().kind == TK::kInt ||
                 Peek().kind == TK::kFloat ||
                 (Peek().kind == TK::kName && !IsName("else") && !IsName("or") && !IsName("and") &&
                  !IsName("if") && !IsName("in") && !IsName("not") && !IsName("is"))) {
        t->kids.push_back(ParsePrimaryWithPostfix());
      }
      n = std::move(t);
    }
    return n;
  }

  // `( a, b, k=v )` appended to n.kids, keyword names to n.names.
  void ParseArgs(Node& n) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (Peek().kind == TK::kName && IsOp("=", 1)) {
        n.names.push_back(Next().text);
        Next();
        n.kids.push_back(ParseExpression());
      } else {
        if (!n.names.empty()) Fail("positional argument after keyword argument");
        n.kids.push_back(ParseExpression());
      }
      if (!IsOp(")")) ExpectOp(",");
    }
    Next();
  }

  NodePtr ParsePrimaryWithPostfix() {
    NodePtr n = ParsePrimary();
    while (true) {
      Deeper();
      if (IsOp(".")) {
        auto a = MakeNode(NodeKind::kAttr, Next().line);
        a->str = ExpectName();
        a->kids.push_back(std::move(n));
        n = std::move(a);
      } else if (IsOp("[")) {
        n = ParseSubscript(std::move(n));
      } else if (IsOp("(")) {
        auto c = MakeNode(NodeKind::kCall, Peek().line);
        c->kids.push_back(std::move(n));
        ParseArgs(*c);
        n = std::move(c);
      } else {
        return n;
      }
    }
  }

  NodePtr ParseSubscript(NodePtr object) {
    int line = Next().line;  // [
    NodePtr parts[3];
    int colons = 0;
    while (!IsOp("]")) {
      if (IsOp(":")) {
        Next();
        if (++colons > 2) Fail("too many ':' in slice");
        continue;
      }
      if (parts[colons]) Fail("expected ']' or ':' in subscript");
      parts[colons] = ParseExpression();
    }
    Next();
    if (colons == 0) {
      if (!parts[0]) Fail("empty subscript []");
      auto n = MakeNode(NodeKind::kIndex, line);
      n->kids.push_back(std::move(object));
      n->kids.push_back(std::move(parts[0]));
      return n;
    }
    auto n = MakeNode(NodeKind::kSlice, line);
    n->kids.push_back(std::move(object));
    for (auto& p : parts) n->kids.push_back(std::move(p));
    return n;
  }

  NodePtr Literal(Value v, int line) {
    auto n = MakeNode(NodeKind::kLiteral, line);
    n->literal = std::move(v);
    return n;
  }

  NodePtr ParsePrimary() {
    const Token& tok = Peek();
    int line = tok.line;
    switch (tok.kind) {
      case TK::kString: {
        std::string s = Next().text;
        while (Peek().kind == TK::kString) s += Next().text;  // adjacent literals join
        return Literal(Value::Str(std::move(s)), line);
      }
      case TK::kInt: {
        int64_t v = 0;
        if (!absl::SimpleAtoi(tok.text, &v)) Fail(absl::StrCat("bad integer ", tok.text));
        Next();
        return Literal(Value::Int(v), line);
      }
      case TK::kFloat: {
        double v = 0;
        if (!absl::SimpleAtod(tok.text, &v)) Fail(absl::StrCat("bad number ", tok.text));
        Next();
        return Literal(Value::Float(v), line);
      }
      case TK::kName: {
        std::string name = Next().text;
        if (name == "true" || name == "True") return Literal(Value::Bool(true), line);
        if (name == "false" || name == "False") return Literal(Value::Bool(false), line);
        if (name == "none" || name == "None") return Literal(Value::None(), line);
        auto n = MakeNode(NodeKind::kName, line);
        n->str = std::move(name);
        return n;
      }
      case TK::kOp:
        return ParseBracketed();
      default:
        Fail(absl::StrCat("expected an expression, found '", tok.text, "'"));
    }
  }

  // ( expr ) and tuples, [ list ], { dict }.
  NodePtr ParseBracketed() {
    int line = Peek().line;
    if (IsOp("(")) {
      Next();
      NodePtr inner = ParseExpressionOrTuple();
      ExpectOp(")");
      return inner;
    }
    if (IsOp("[")) {
      Next();
      auto n = MakeNode(NodeKind::kList, line);
      while (!IsOp("]")) {
        n->kids.push_back(ParseExpression());
        if (!IsOp("]")) ExpectOp(",");
      }
      Next();
      return n;
    }
    if (IsOp("{")) {
      Next();
      auto n = MakeNode(NodeKind::kDict, line);
      while (!IsOp("}")) {
        n->kids.push_back(ParseExpression());
        ExpectOp(":");
        n->kids.push_back(ParseExpression());
        if (!IsOp("}")) ExpectOp(",");
      }
      Next();
      return n;
    }
    Fail(absl::StrCat("expected an expression, found '", Peek().text, "'"));
  }

  // Bounds nesting (brackets, unary operators, blocks) so hostile input cannot exhaust the
  // stack of the parser or of the interpreter's tree walk. A chain built by a loop
  // (a + b + c, x.y[0](), x | f | g) nests one level deeper at each link (Deeper) until
  // the guard of its enclosing expression restores the depth.
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : parser(p), saved(p->depth_) { parser->Deeper(); }
    ~DepthGuard() { parser->depth_ = saved; }
    Parser* parser;
    int saved;
  };
  void Deeper() {
    if (++depth_ > kMaxNesting) Fail("template nested too deeply");
  }
  static constexpr int kMaxNesting = 200;

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::vector<NodePtr> Parse(const std::vector<Token>& tokens) { return Parser(tokens).ParseAll(); }

}  // namespace pagoda::chat
