// Jinja's built-in filters, tests and methods (of strings, lists and dicts) over Values.
// All throw TemplateError: "unsupported" for a name outside the subset, "runtime" for an
// argument of the wrong type.
#pragma once

#include <string>

#include "chat/value.h"

namespace pagoda::chat {

// Argument `index` (positional) or `keyword`; undefined when neither was passed.
Value GetArg(const CallArgs& args, size_t index, const char* keyword);

// Python's str.strip/lstrip/rstrip of `chars` (whitespace when chars is undefined/none).
std::string StripText(const std::string& s, const Value& chars, bool left, bool right);

// `input | name(args)`.
Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args, int line);

// `value is name(args)`.
bool ApplyTest(const std::string& name, const Value& value, const CallArgs& args, int line);

// `needle in haystack` (substring, list element, dict key; false for undefined).
bool ValueIn(const Value& needle, const Value& haystack, int line);

// `a < b` for two numbers or two strings.
bool ValueLess(const Value& a, const Value& b, int line);

// `self.name` as a bound method (str.strip, list.append, dict.items, ...); undefined when
// the type has no such method.
Value GetMethod(const Value& self, const std::string& name, int line);

}  // namespace pagoda::chat
