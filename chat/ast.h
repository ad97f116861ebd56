// The parsed template: one node type for expressions and statements.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/value.h"

namespace pagoda::chat {

enum class NodeKind {
  // Expressions.
  kLiteral,  // literal
  kName,     // str = variable name
  kList,     // kids = items
  kDict,     // kids = key0, value0, key1, value1, ...
  kAttr,     // kids[0] . str
  kIndex,    // kids[0] [ kids[1] ]
  kSlice,    // kids[0] [ kids[1] : kids[2] : kids[3] ] (absent parts are null)
  kCall,     // kids[0] ( kids[1..] ); the last names.size() arguments are keywords
  kFilter,   // kids[0] | str ( kids[1..] ), keywords as in kCall
  kTest,     // kids[0] is [not] str ( kids[1..] ); flag = negated
  kUnary,    // str = "not" or "-" or "+", kids[0]
  kBinary,   // str = operator, kids[0] op kids[1]
  kCond,     // kids[0] if kids[1] else kids[2] (kids[2] may be null)
  // Statements.
  kText,         // str = text
  kOutput,       // {{ kids[0] }}
  kIf,           // if kids[0]: body, else: else_body (elif nests an kIf in else_body)
  kFor,          // for names in kids[0] [if kids[1]]: body, else: else_body
  kSet,          // set kids[0] (kName, kAttr or kList of names) = kids[1], or = body's output
  kMacro,        // macro str(names, defaults in kids (null when none)): body
  kCallBlock,    // call kids[0] (a kCall): body is caller()
  kFilterBlock,  // filter: kids[0] is a kFilter whose input is null; body filtered
  kBreak,
  kContinue,
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  int line = 0;
  std::string str;
  Value literal;
  std::vector<NodePtr> kids;
  std::vector<std::string> names;
  std::vector<NodePtr> body;
  std::vector<NodePtr> else_body;
  bool flag = false;
};

}  // namespace pagoda::chat
