// Jinja's built-in filters, tests, methods (of strings, lists and dicts) and operators over
// Values. All throw TemplateError: "unsupported" for a name outside the subset, "runtime"
// for an argument of the wrong type, "budget" when the work would exceed the render's
// budget (each charges its steps and the bytes it builds to `budget` first).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "chat/budget.h"
#include "chat/spans.h"
#include "chat/value.h"

namespace pagoda::chat {

// Argument `index` (positional) or `keyword`; undefined when neither was passed.
const Value& GetArg(const CallArgs& args, size_t index, const char* keyword);

// Python's str.strip/lstrip/rstrip of `chars` (whitespace when chars is undefined/none).
std::string StripText(const std::string& s, const Value& chars, bool left, bool right,
                      Budget& budget);
// As StripText, for a string value: the kept bytes keep their content spans.
Value StripValue(const Value& s, const Value& chars, bool left, bool right, Budget& budget);

// Where `needle` first occurs in `hay` at or after `from`; npos when nowhere. Linear time.
size_t FindText(std::string_view hay, std::string_view needle, size_t from = 0);

// `input | name(args)`. A string result keeps exact content spans for trim/strip, join and
// filters that return an input; for others it is all content when any input had content.
Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args, int line,
                  Budget& budget);

// `value is name(args)`.
bool ApplyTest(const std::string& name, const Value& value, const CallArgs& args, int line,
               Budget& budget);

// `needle in haystack` (substring, list element, dict key; false for undefined).
bool ValueIn(const Value& needle, const Value& haystack, int line, Budget& budget);

// `a < b` for two numbers or two strings.
bool ValueLess(const Value& a, const Value& b, int line, Budget& budget);

// True when values of `kind` have a method `name` (str.strip, list.append, dict.items, ...).
bool HasMethod(Value::Kind kind, const std::string& name);

// `self.name(args)`; precondition: HasMethod(self.kind, name).
Value CallMethod(const Value& self, const std::string& name, CallArgs& args, int line,
                 Budget& budget);

// `self.name` as a function value (it holds a list or dict weakly: calling it after that
// value is gone is an error); undefined when the type has no such method.
Value GetMethod(const Value& self, const std::string& name, int line, Budget& budget);

// Checks that `item` may be stored inside the list or dict `container`: it does not hold
// `container` (no value holds itself) and it nests under max_depth; charges the walk.
void CheckInsert(const Value& container, const Value& item, int line, Budget& budget);

// `object[key] = v` in place for a dict `object` (a new key goes last), after CheckInsert.
void SetKey(const Value& object, const std::string& key, const Value& v, int line, Budget& budget);

// `a op b` for the operators that evaluate both sides: == != in, not in, ~, < > <= >=,
// + - * / // % **; integer overflow and division by zero are errors.
Value BinaryOp(const std::string& op, const Value& a, const Value& b, int line, Budget& budget);

// `object[start:stop:step]` of a list or string; `given` says which parts were written.
Value SliceOf(const Value& object, const int64_t parts[3], const bool given[3], int line,
              Budget& budget);

}  // namespace pagoda::chat
