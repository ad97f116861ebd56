// An independent JSON Schema check for the grammar tests: walks a parsed value against the
// subset grammar/ compiles (no code shared with the compiler). Returns "" when the value
// validates, else the first problem and where.
#pragma once

#include <algorithm>
#include <regex>
#include <string>

#include "nlohmann/json.hpp"

namespace pagoda::grammar::testing {

using nlohmann::json;

inline size_t CodePoints(const std::string& s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; });
}

inline bool HasType(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_number_integer();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

// `format` values by their definitions (RFC 3339, RFC 4122), written apart from grammar/.
inline bool HasFormat(const std::string& s, const std::string& format) {
  static const std::regex kDate(R"(\d{4}-(\d{2})-(\d{2}))");
  static const std::regex kTime(
      R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))");
  static const std::regex kUuid(R"([0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})");
  auto date_ok = [](const std::string& d) {
    std::smatch m;
    if (!std::regex_match(d, m, kDate)) return false;
    const int month = std::stoi(m[1]), day = std::stoi(m[2]);
    return month >= 1 && month <= 12 && day >= 1 && day <= 31;
  };
  if (format == "date") return date_ok(s);
  if (format == "time") return std::regex_match(s, kTime);
  if (format == "uuid") return std::regex_match(s, kUuid);
  if (format == "date-time") {
    const size_t t = s.find('T');
    return t != std::string::npos && date_ok(s.substr(0, t)) &&
           std::regex_match(s.substr(t + 1), kTime);
  }
  return false;
}

inline std::string CheckSchema(const json& v, const json& schema, const json& root,
                               const std::string& at = "$") {
  if (schema.is_boolean()) return schema.get<bool>() ? "" : at + ": false schema";
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"].get<std::string>();
    return CheckSchema(v, root.at(json::json_pointer(ref.substr(1))), root, at);
  }
  if (schema.contains("const") && v != schema["const"]) return at + ": not the const";
  if (schema.contains("enum")) {
    const json& e = schema["enum"];
    if (std::find(e.begin(), e.end(), v) == e.end()) return at + ": not in enum";
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    int matches = 0;
    for (const json& sub : schema[key]) matches += CheckSchema(v, sub, root, at).empty();
    if (matches == 0 || (std::string(key) == "oneOf" && matches != 1)) {
      return at + ": " + key + " matched " + std::to_string(matches);
    }
  }
  if (schema.contains("allOf")) {
    for (const json& sub : schema["allOf"]) {
      if (auto e = CheckSchema(v, sub, root, at); !e.empty()) return e;
    }
  }
  if (schema.contains("type")) {
    const json& t = schema["type"];
    bool ok = false;
    if (t.is_string()) ok = HasType(v, t.get<std::string>());
    for (const json& one : t.is_array() ? t : json::array())
      ok |= HasType(v, one.get<std::string>());
    if (!ok) return at + ": wrong type";
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const json& name : schema.value("required", json::array())) {
      if (!v.contains(name.get<std::string>())) return at + ": missing " + name.get<std::string>();
    }
    for (const auto& [key, value] : v.items()) {
      const std::string here = at + "." + key;
      if (props.contains(key)) {
        if (auto e = CheckSchema(value, props[key], root, here); !e.empty()) return e;
      } else if (schema.contains("additionalProperties")) {
        if (auto e = CheckSchema(value, schema["additionalProperties"], root, here); !e.empty()) {
          return e;
        }
      }
    }
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) {
      return at + ": too few items";
    }
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) {
      return at + ": too many items";
    }
    if (schema.contains("items")) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (auto e = CheckSchema(v[i], schema["items"], root, at + "[" + std::to_string(i) + "]");
            !e.empty()) {
          return e;
        }
      }
    }
  }
  if (v.is_string()) {
    const size_t n = CodePoints(v.get<std::string>());
    if (schema.contains("minLength") && n < schema["minLength"].get<size_t>()) {
      return at + ": too short";
    }
    if (schema.contains("maxLength") && n > schema["maxLength"].get<size_t>()) {
      return at + ": too long";
    }
    if (schema.contains("pattern") &&
        !std::regex_search(v.get<std::string>(),
                           std::regex(schema["pattern"].get<std::string>()))) {
      return at + ": does not match the pattern";
    }
    if (schema.contains("format") &&
        !HasFormat(v.get<std::string>(), schema["format"].get<std::string>())) {
      return at + ": not a " + schema["format"].get<std::string>();
    }
  }
  return "";
}

}  // namespace pagoda::grammar::testing
