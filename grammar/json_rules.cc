#include "grammar/json_rules.h"

#include <vector>

namespace pagoda::grammar {

int32_t JsonRules::Ws() {
  if (ws_ >= 0) return ws_;
  const int32_t indent = b_->Repeat("indent", b_->Byte(' '), 0, kMaxIndent);
  ws_ = b_->NewRule("ws");
  b_->AddAlternative(ws_, {});
  b_->AddAlternative(ws_, {b_->Byte(' ')});
  b_->AddAlternative(ws_, {b_->Byte('\n'), b_->Ref(indent)});
  return ws_;
}

int32_t JsonRules::Comma() {
  if (comma_ >= 0) return comma_;
  comma_ = b_->NewRule("comma");
  b_->AddAlternative(comma_, {b_->Ref(Ws()), b_->Byte(','), b_->Ref(Ws())});
  return comma_;
}

int32_t JsonRules::Char() {
  if (char_ >= 0) return char_;
  char_ = b_->NewRule("char");
  const Symbol cont = b_->Bytes(ByteSet().AddRange(0x80, 0xBF));
  // Printable ASCII except '"' and '\\'; DEL is allowed by JSON.
  b_->AddAlternative(
      char_, {b_->Bytes(ByteSet().AddRange(0x20, 0x21).AddRange(0x23, 0x5B).AddRange(0x5D, 0x7F))});
  b_->AddAlternative(
      char_,
      {b_->Byte('\\'),
       b_->Bytes(
           ByteSet().Add('"').Add('\\').Add('/').Add('b').Add('f').Add('n').Add('r').Add('t'))});
  // \uXXXX without surrogates (an unpaired one is not valid text; pairs are not offered).
  const Symbol hex = b_->Bytes(ByteSet().AddRange('0', '9').AddRange('a', 'f').AddRange('A', 'F'));
  const Symbol not_d = b_->Bytes(ByteSet()
                                     .AddRange('0', '9')
                                     .AddRange('a', 'c')
                                     .AddRange('A', 'C')
                                     .AddRange('e', 'f')
                                     .AddRange('E', 'F'));
  b_->AddAlternative(char_, {b_->Byte('\\'), b_->Byte('u'), not_d, hex, hex, hex});
  b_->AddAlternative(char_, {b_->Byte('\\'), b_->Byte('u'), b_->Bytes(ByteSet().Add('d').Add('D')),
                             b_->Bytes(ByteSet().AddRange('0', '7')), hex, hex});
  // Well-formed UTF-8 (Unicode Table 3-7).
  b_->AddAlternative(char_, {b_->Bytes(ByteSet().AddRange(0xC2, 0xDF)), cont});
  b_->AddAlternative(char_, {b_->Byte(0xE0), b_->Bytes(ByteSet().AddRange(0xA0, 0xBF)), cont});
  b_->AddAlternative(char_,
                     {b_->Bytes(ByteSet().AddRange(0xE1, 0xEC).AddRange(0xEE, 0xEF)), cont, cont});
  b_->AddAlternative(char_, {b_->Byte(0xED), b_->Bytes(ByteSet().AddRange(0x80, 0x9F)), cont});
  b_->AddAlternative(char_,
                     {b_->Byte(0xF0), b_->Bytes(ByteSet().AddRange(0x90, 0xBF)), cont, cont});
  b_->AddAlternative(char_, {b_->Bytes(ByteSet().AddRange(0xF1, 0xF3)), cont, cont, cont});
  b_->AddAlternative(char_,
                     {b_->Byte(0xF4), b_->Bytes(ByteSet().AddRange(0x80, 0x8F)), cont, cont});
  return char_;
}

int32_t JsonRules::String(int min_chars, int max_chars) {
  const bool plain = min_chars == 0 && max_chars < 0;
  if (plain && string_ >= 0) return string_;
  const int32_t chars = b_->Repeat("chars", b_->Ref(Char()), min_chars, max_chars);
  const int32_t rule = b_->NewRule("string");
  b_->AddAlternative(rule, {b_->Byte('"'), b_->Ref(chars), b_->Byte('"')});
  if (plain) string_ = rule;
  return rule;
}

int32_t JsonRules::Digits(int min, int max) {
  return b_->Repeat("digits", b_->Bytes(ByteSet().AddRange('0', '9')), min, max);
}

int32_t JsonRules::Integer() {
  if (integer_ >= 0) return integer_;
  const int32_t natural = b_->NewRule("natural");
  b_->AddAlternative(natural, {b_->Byte('0')});
  b_->AddAlternative(natural, {b_->Bytes(ByteSet().AddRange('1', '9')), b_->Ref(Digits(0, 14))});
  integer_ = b_->NewRule("integer");
  b_->AddAlternative(integer_, {b_->Ref(natural)});
  b_->AddAlternative(integer_, {b_->Byte('-'), b_->Ref(natural)});
  return integer_;
}

int32_t JsonRules::Number() {
  if (number_ >= 0) return number_;
  const int32_t frac = b_->NewRule("frac");
  b_->AddAlternative(frac, {});
  b_->AddAlternative(frac, {b_->Byte('.'), b_->Ref(Digits(1, -1))});
  const int32_t exp = b_->NewRule("exp");
  b_->AddAlternative(exp, {});
  b_->AddAlternative(exp, {b_->Bytes(ByteSet().Add('e').Add('E')),
                           b_->Bytes(ByteSet().Add('+').Add('-')), b_->Ref(Digits(1, 2))});
  b_->AddAlternative(exp, {b_->Bytes(ByteSet().Add('e').Add('E')), b_->Ref(Digits(1, 2))});
  number_ = b_->NewRule("number");
  b_->AddAlternative(number_, {b_->Ref(Integer()), b_->Ref(frac), b_->Ref(exp)});
  return number_;
}

int32_t JsonRules::Boolean() {
  if (boolean_ >= 0) return boolean_;
  boolean_ = b_->NewRule("boolean");
  std::vector<Symbol> t, f;
  b_->AppendLiteral("true", &t);
  b_->AppendLiteral("false", &f);
  b_->AddAlternative(boolean_, std::move(t));
  b_->AddAlternative(boolean_, std::move(f));
  return boolean_;
}

int32_t JsonRules::Null() {
  if (null_ < 0) null_ = b_->LiteralRule("null");
  return null_;
}

int32_t JsonRules::Value() {
  if (value_ >= 0) return value_;
  value_ = b_->NewRule("value");
  for (int32_t r : {Object(), Array(), String(0, -1), Number(), Boolean(), Null()}) {
    b_->AddAlternative(value_, {b_->Ref(r)});
  }
  return value_;
}

int32_t JsonRules::Object() {
  if (object_ < 0) object_ = MapOf(Value());
  return object_;
}

int32_t JsonRules::Array() {
  if (array_ < 0) array_ = ArrayOf(Value(), 0, -1);
  return array_;
}

int32_t JsonRules::Colon() {
  if (colon_ >= 0) return colon_;
  colon_ = b_->NewRule("colon");
  b_->AddAlternative(colon_, {b_->Ref(Ws()), b_->Byte(':'), b_->Ref(Ws())});
  return colon_;
}

int32_t JsonRules::MapOf(int32_t value) {
  const int32_t member = b_->NewRule("member");
  b_->AddAlternative(member, {b_->Ref(String(0, -1)), b_->Ref(Colon()), b_->Ref(value)});
  const int32_t members = b_->Repeat("members", b_->Ref(member), 0, -1, Comma());
  const int32_t rule = b_->NewRule("object");
  b_->AddAlternative(
      rule, {b_->Byte('{'), b_->Ref(Ws()), b_->Ref(members), b_->Ref(Ws()), b_->Byte('}')});
  return rule;
}

int32_t JsonRules::ArrayOf(int32_t item, int min_items, int max_items) {
  const int32_t items = b_->Repeat("items", b_->Ref(item), min_items, max_items, Comma());
  const int32_t rule = b_->NewRule("array");
  b_->AddAlternative(rule,
                     {b_->Byte('['), b_->Ref(Ws()), b_->Ref(items), b_->Ref(Ws()), b_->Byte(']')});
  return rule;
}

}  // namespace pagoda::grammar
