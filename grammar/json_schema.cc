#include "grammar/json_schema.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/json_limits.h"
#include "grammar/json_rules.h"
#include "grammar/string_format.h"
#include "nlohmann/json.hpp"

namespace pagoda::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Keywords that describe without constraining: accepted and left out of the grammar.
bool IsAnnotation(absl::string_view key) {
  static const auto* kSet = new absl::flat_hash_set<absl::string_view>{
      "$schema",  "$id",        "id",       "title",     "description", "default",    "examples",
      "$comment", "deprecated", "readOnly", "writeOnly", "$defs",       "definitions"};
  return kSet->contains(key);
}

bool IsSupported(absl::string_view key) {
  static const auto* kSet = new absl::flat_hash_set<absl::string_view>{
      "type",  "enum",      "const",     "properties", "required", "additionalProperties",
      "items", "minItems",  "maxItems",  "anyOf",      "oneOf",    "allOf",
      "$ref",  "minLength", "maxLength", "pattern",    "format"};
  return kSet->contains(key);
}

bool IsTypeName(absl::string_view name) {
  for (absl::string_view type :
       {"object", "array", "string", "number", "integer", "boolean", "null"}) {
    if (name == type) return true;
  }
  return false;
}

absl::Status Unsupported(absl::string_view keyword, const std::string& path) {
  return absl::InvalidArgumentError(absl::StrCat("json schema: unsupported keyword '", keyword,
                                                 "' at ", path.empty() ? "/" : path));
}

absl::Status Bad(absl::string_view keyword, const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("json schema: '", keyword, "' at ", path.empty() ? "/" : path, ": ", what));
}

class Compiler {
 public:
  Compiler(const Json& root, const SchemaLimits& limits)
      : root_(root), limits_(limits), b_(limits.max_elements), rules_(&b_) {}

  absl::StatusOr<int32_t> Compile(const Json& schema, const std::string& path, int depth);
  GrammarBuilder& builder() { return b_; }

 private:
  absl::StatusOr<int32_t> CompileRef(const Json& ref, const std::string& path, int depth);
  absl::StatusOr<int32_t> CompileAlternatives(const Json& schema, absl::string_view keyword,
                                              const std::string& path, int depth);
  absl::StatusOr<int32_t> CompileType(absl::string_view type, const Json& schema,
                                      const std::string& path, int depth);
  absl::StatusOr<int32_t> CompileObject(const Json& schema, const std::string& path, int depth);
  absl::StatusOr<int32_t> CompileArray(const Json& schema, const std::string& path, int depth);
  absl::StatusOr<int32_t> CompileString(const Json& schema, const std::string& path);
  // A rule matching the compact serialization of each of `values`: a byte trie of them,
  // so a position inside it is one head however many values share its prefix.
  int32_t Literals(const std::vector<Json>& values);
  absl::Status OverLimit(const std::string& path) const {
    return Bad("schema", path, absl::StrCat("grammar over ", limits_.max_elements, " elements"));
  }
  // *out = schema[key] as a count in [0, max_repeat]; `fallback` when absent.
  absl::Status Count(const Json& schema, absl::string_view key, const std::string& path,
                     int fallback, int* out);

  const Json& root_;
  SchemaLimits limits_;
  GrammarBuilder b_;
  JsonRules rules_;
  std::map<std::string, int32_t> refs_;
};

absl::StatusOr<int32_t> Compiler::Compile(const Json& schema, const std::string& path, int depth) {
  if (depth > limits_.max_depth) {
    return Bad("schema", path, absl::StrCat("nested deeper than ", limits_.max_depth));
  }
  if (b_.over_limit()) return OverLimit(path);
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return rules_.Value();
    return Bad("schema", path, "the schema false matches nothing");
  }
  if (!schema.is_object()) return Bad("schema", path, "must be an object or a boolean");
  std::vector<std::string> constraining;
  for (const auto& [key, value] : schema.items()) {
    if (IsAnnotation(key)) continue;
    if (!IsSupported(key)) return Unsupported(key, path);
    constraining.push_back(key);
  }
  // Combinators stand alone: siblings would need an intersection of languages.
  for (const std::string alone : {"$ref", "anyOf", "oneOf", "allOf", "const", "enum"}) {
    if (!schema.contains(alone)) continue;
    for (const std::string& other : constraining) {
      if (other == alone || (other == "type" && alone != "$ref")) continue;
      return Bad(other, path, absl::StrCat("not supported beside '", alone, "'"));
    }
  }
  if (schema.contains("$ref")) return CompileRef(schema["$ref"], path, depth);
  if (schema.contains("const")) return Literals({schema["const"]});
  if (schema.contains("enum")) {
    const Json& values = schema["enum"];
    if (!values.is_array() || values.empty()) return Bad("enum", path, "must be a non-empty array");
    const int32_t rule = Literals(std::vector<Json>(values.begin(), values.end()));
    if (b_.over_limit()) return OverLimit(path);
    return rule;
  }
  for (const std::string keyword : {"anyOf", "oneOf", "allOf"}) {
    if (schema.contains(keyword)) return CompileAlternatives(schema, keyword, path, depth);
  }
  std::vector<std::string> types;
  if (schema.contains("type")) {
    const Json& type = schema["type"];
    if (type.is_string()) {
      types.push_back(type.get<std::string>());
    } else if (type.is_array() && !type.empty()) {
      for (const Json& t : type) {
        if (!t.is_string()) return Bad("type", path, "must be a string or an array of strings");
        std::string name = t.get<std::string>();
        // Each name is compiled: an unknown one is refused here, and JSON Schema wants them
        // unique, so the list is at most the seven types long.
        if (!IsTypeName(name)) return Bad("type", path, absl::StrCat("unknown type '", name, "'"));
        if (std::find(types.begin(), types.end(), name) != types.end()) {
          return Bad("type", path, absl::StrCat("names '", name, "' twice"));
        }
        types.push_back(std::move(name));
      }
    } else {
      return Bad("type", path, "must be a string or a non-empty array of strings");
    }
  } else {
    // No type: the type the keywords imply (a subset of what the schema allows).
    for (const std::string& key : constraining) {
      if (key == "properties" || key == "required" || key == "additionalProperties") {
        types = {"object"};
      } else if (key == "items" || key == "minItems" || key == "maxItems") {
        types = {"array"};
      } else if (key == "minLength" || key == "maxLength" || key == "pattern" || key == "format") {
        types = {"string"};
      }
    }
    if (types.empty()) return rules_.Value();
  }
  if (types.size() == 1) return CompileType(types[0], schema, path, depth);
  const int32_t rule = b_.NewRule("types");
  for (const std::string& type : types) {
    auto r = CompileType(type, schema, path, depth);
    if (!r.ok()) return r.status();
    if (b_.over_limit()) return OverLimit(path);
    b_.AddAlternative(rule, {b_.Ref(*r)});
  }
  return rule;
}

absl::StatusOr<int32_t> Compiler::CompileRef(const Json& ref, const std::string& path, int depth) {
  if (!ref.is_string()) return Bad("$ref", path, "must be a string");
  const std::string target = ref.get<std::string>();
  if (auto it = refs_.find(target); it != refs_.end()) return it->second;
  if (target.empty() || target[0] != '#') {
    return Bad("$ref", path, absl::StrCat("only local references (#...) are supported: ", target));
  }
  const Json* resolved = nullptr;
  try {
    const Json::json_pointer pointer(target.substr(1));
    if (root_.contains(pointer)) resolved = &root_.at(pointer);
  } catch (const Json::exception&) {
    return Bad("$ref", path, absl::StrCat("malformed reference ", target));
  }
  if (resolved == nullptr) return Bad("$ref", path, absl::StrCat("dangling reference ", target));
  // Declared before its target is compiled, so a recursive schema refers back to it.
  const int32_t rule = b_.NewRule("ref");
  refs_[target] = rule;
  auto body = Compile(*resolved, target.substr(1), depth + 1);
  if (!body.ok()) return body.status();
  b_.AddAlternative(rule, {b_.Ref(*body)});
  return rule;
}

absl::StatusOr<int32_t> Compiler::CompileAlternatives(const Json& schema, absl::string_view keyword,
                                                      const std::string& path, int depth) {
  const Json& subs = schema[std::string(keyword)];
  if (!subs.is_array() || subs.empty()) return Bad(keyword, path, "must be a non-empty array");
  if (keyword == "allOf" && subs.size() != 1) {
    return Bad(keyword, path, "only a single subschema is supported");
  }
  if (schema.contains("type")) {
    return Bad("type", path, absl::StrCat("not supported beside '", keyword, "'"));
  }
  // oneOf is compiled as anyOf: the output matches at least one subschema (docs/API.md).
  const int32_t rule = b_.NewRule(keyword);
  for (size_t i = 0; i < subs.size(); ++i) {
    auto r = Compile(subs[i], absl::StrCat(path, "/", keyword, "/", i), depth + 1);
    if (!r.ok()) return r.status();
    if (b_.over_limit()) return OverLimit(path);
    b_.AddAlternative(rule, {b_.Ref(*r)});
  }
  return rule;
}

absl::StatusOr<int32_t> Compiler::CompileType(absl::string_view type, const Json& schema,
                                              const std::string& path, int depth) {
  if (type == "object") return CompileObject(schema, path, depth);
  if (type == "array") return CompileArray(schema, path, depth);
  if (type == "string") return CompileString(schema, path);
  if (type == "number") return rules_.Number();
  if (type == "integer") return rules_.Integer();
  if (type == "boolean") return rules_.Boolean();
  if (type == "null") return rules_.Null();
  return Bad("type", path, absl::StrCat("unknown type '", type, "'"));
}

absl::StatusOr<int32_t> Compiler::CompileObject(const Json& schema, const std::string& path,
                                                int depth) {
  const Json empty = Json::object();
  const Json& props = schema.contains("properties") ? schema["properties"] : empty;
  if (!props.is_object()) return Bad("properties", path, "must be an object");
  // Looked up by hash: the ordered object's own lookup is linear in its members.
  absl::flat_hash_set<std::string> declared;
  for (const auto& [name, sub] : props.items()) declared.insert(name);
  absl::flat_hash_set<std::string> required;
  if (schema.contains("required")) {
    const Json& req = schema["required"];
    if (!req.is_array()) return Bad("required", path, "must be an array of strings");
    for (const Json& name : req) {
      if (!name.is_string()) return Bad("required", path, "must be an array of strings");
      if (!declared.contains(name.get<std::string>())) {
        return Bad("required", path,
                   absl::StrCat("names '", name.get<std::string>(), "', not in 'properties'"));
      }
      required.insert(name.get<std::string>());
    }
  }
  const Json* additional =
      schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
  if (additional != nullptr && !additional->is_boolean() && !additional->is_object()) {
    return Bad("additionalProperties", path, "must be a boolean or a schema");
  }
  if (props.empty()) {
    if (additional == nullptr || (additional->is_boolean() && additional->get<bool>())) {
      return rules_.Object();
    }
    if (additional->is_boolean()) {  // false: only {}
      const int32_t rule = b_.NewRule("empty_object");
      b_.AddAlternative(rule, {b_.Byte('{'), b_.Ref(rules_.Ws()), b_.Byte('}')});
      return rule;
    }
    auto value = Compile(*additional, path + "/additionalProperties", depth + 1);
    if (!value.ok()) return value.status();
    return rules_.MapOf(*value);
  }
  // Declared properties only, in declared order, each optional one possibly left out
  // (additional properties are never generated: the output still validates).
  // first[i]: members i.. with none written yet; more[i]: the same after one was written.
  const size_t n = props.size();
  std::vector<int32_t> first(n + 1), more(n + 1);
  first[n] = b_.NewRule("props_end");
  b_.AddAlternative(first[n], {});
  more[n] = first[n];
  std::vector<std::pair<std::string, const Json*>> items;
  for (const auto& [name, sub] : props.items()) items.emplace_back(name, &sub);
  for (size_t i = n; i-- > 0;) {
    const auto& [name, sub] = items[i];
    auto value = Compile(*sub, absl::StrCat(path, "/properties/", name), depth + 1);
    if (!value.ok()) return value.status();
    const int32_t member = b_.NewRule("prop");
    std::vector<Symbol> seq;
    b_.AppendLiteral(Json(name).dump(), &seq);
    seq.push_back(b_.Ref(rules_.Colon()));
    seq.push_back(b_.Ref(*value));
    b_.AddAlternative(member, std::move(seq));
    const bool optional = !required.contains(name);
    more[i] = b_.NewRule("props_more");
    b_.AddAlternative(more[i], {b_.Ref(rules_.Comma()), b_.Ref(member), b_.Ref(more[i + 1])});
    if (optional) b_.AddAlternative(more[i], {b_.Ref(more[i + 1])});
    first[i] = b_.NewRule("props");
    b_.AddAlternative(first[i], {b_.Ref(member), b_.Ref(more[i + 1])});
    if (optional) b_.AddAlternative(first[i], {b_.Ref(first[i + 1])});
  }
  const int32_t rule = b_.NewRule("object");
  b_.AddAlternative(rule, {b_.Byte('{'), b_.Ref(rules_.Ws()), b_.Ref(first[0]), b_.Ref(rules_.Ws()),
                           b_.Byte('}')});
  return rule;
}

absl::StatusOr<int32_t> Compiler::CompileArray(const Json& schema, const std::string& path,
                                               int depth) {
  int32_t item = -1;
  if (schema.contains("items")) {
    const Json& items = schema["items"];
    if (items.is_array()) return Bad("items", path, "tuple form (an array) is not supported");
    auto r = Compile(items, path + "/items", depth + 1);
    if (!r.ok()) return r.status();
    item = *r;
  } else {
    item = rules_.Value();
  }
  int min = 0, max = -1;
  if (auto s = Count(schema, "minItems", path, 0, &min); !s.ok()) return s;
  if (auto s = Count(schema, "maxItems", path, -1, &max); !s.ok()) return s;
  if (max >= 0 && max < min) return Bad("maxItems", path, "is below minItems");
  return rules_.ArrayOf(item, min, max);
}

absl::StatusOr<int32_t> Compiler::CompileString(const Json& schema, const std::string& path) {
  int min = 0, max = -1;
  if (auto s = Count(schema, "minLength", path, 0, &min); !s.ok()) return s;
  if (auto s = Count(schema, "maxLength", path, -1, &max); !s.ok()) return s;
  if (max >= 0 && max < min) return Bad("maxLength", path, "is below minLength");
  const bool has_pattern = schema.contains("pattern");
  const bool has_format = schema.contains("format");
  if (!has_pattern && !has_format) return rules_.String(min, max);
  if (has_pattern && has_format) return Bad("format", path, "not supported beside 'pattern'");
  if (min != 0 || max >= 0) {
    return Bad(has_pattern ? "pattern" : "format", path, "not supported with minLength/maxLength");
  }
  const std::string key = has_pattern ? "pattern" : "format";
  if (!schema[key].is_string()) return Bad(key, path, "must be a string");
  const std::string text = schema[key].get<std::string>();
  auto body = has_pattern ? CompilePattern(text, &b_, rules_.Char())
                          : CompileFormat(text, &b_, rules_.Char());
  if (!body.ok()) return Bad(key, path, body.status().message());
  if (b_.over_limit()) return OverLimit(path);
  const int32_t rule = b_.NewRule(key);
  b_.AddAlternative(rule, {b_.Byte('"'), b_.Ref(*body), b_.Byte('"')});
  return rule;
}

int32_t Compiler::Literals(const std::vector<Json>& values) {
  std::vector<std::string> texts;
  texts.reserve(values.size());
  for (const Json& v : values) texts.push_back(v.dump());
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  // A trie node: the texts [lo, hi) share their first `depth` bytes, and they either differ
  // at byte `depth` or the first of them ends there. Each gets a rule with an alternative per
  // next byte (the run of bytes all its texts share from there, then the child node), and
  // an empty one when a text ends. Built from a work list: a trie may be deep.
  struct Node {
    int32_t rule;
    size_t lo, hi, depth;
  };
  const int32_t root = b_.NewRule("literal");
  std::vector<Node> todo = {{root, 0, texts.size(), 0}};
  while (!todo.empty() && !b_.over_limit()) {
    const Node node = todo.back();
    todo.pop_back();
    size_t i = node.lo;
    if (texts[i].size() == node.depth) {
      b_.AddAlternative(node.rule, {});
      ++i;
    }
    while (i < node.hi) {
      const char c = texts[i][node.depth];
      size_t j = i + 1;
      while (j < node.hi && texts[j][node.depth] == c) ++j;
      // Sorted: what the first and the last of the group share, all of them share.
      const std::string& first = texts[i];
      const std::string& last = texts[j - 1];
      size_t end = node.depth + 1;
      while (end < first.size() && end < last.size() && first[end] == last[end]) ++end;
      std::vector<Symbol> seq;
      b_.AppendLiteral(absl::string_view(first).substr(node.depth, end - node.depth), &seq);
      if (j - i > 1 || first.size() > end) {
        const int32_t child = b_.NewRule("literal");
        seq.push_back(b_.Ref(child));
        todo.push_back({child, i, j, end});
      }
      b_.AddAlternative(node.rule, std::move(seq));
      i = j;
    }
  }
  return root;
}

absl::Status Compiler::Count(const Json& schema, absl::string_view key, const std::string& path,
                             int fallback, int* out) {
  *out = fallback;
  if (!schema.contains(std::string(key))) return absl::OkStatus();
  const Json& v = schema[std::string(key)];
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    return Bad(key, path, "must be a non-negative integer");
  }
  if (v.get<int64_t>() > limits_.max_repeat) {
    return Bad(key, path, absl::StrCat("over the limit of ", limits_.max_repeat));
  }
  *out = static_cast<int>(v.get<int64_t>());
  return absl::OkStatus();
}

}  // namespace

std::shared_ptr<const Grammar> JsonObjectGrammar() {
  static const auto* kGrammar = [] {
    GrammarBuilder b;
    JsonRules rules(&b);
    const int32_t root = rules.Object();
    return new std::shared_ptr<const Grammar>(
        std::make_shared<const Grammar>(*std::move(b).Build(root)));
  }();
  return *kGrammar;
}

namespace {

// What walking `value` costs: its nesting depth, and Σ members² over its objects (what an
// order-keeping parse costs). Iterative: the text may nest far deeper than a stack allows.
struct Shape {
  int64_t depth = 0;
  int64_t member_work = 0;
};

Shape ShapeOf(const nlohmann::json& value) {
  Shape shape;
  std::vector<std::pair<const nlohmann::json*, int64_t>> todo = {{&value, 1}};
  while (!todo.empty()) {
    const auto [v, depth] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    shape.depth = std::max(shape.depth, depth);
    if (v->is_object()) shape.member_work += static_cast<int64_t>(v->size()) * v->size();
    for (const nlohmann::json& child : *v) todo.emplace_back(&child, depth + 1);
  }
  return shape;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(absl::string_view schema,
                                                                 const SchemaLimits& limits) {
  // One linear pass before any parse: a parser recurses per level and builds a value per
  // element, so deep or vast text must be refused unparsed (a schema may come as text of
  // any size from gRPC).
  if (schema.size() > limits.max_text_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("json schema: ", schema.size(), " bytes; at most ", limits.max_text_bytes));
  }
  if (absl::Status s = CheckJsonLimits(
          std::string_view(schema.data(), schema.size()),
          JsonLimits{.max_depth = limits.max_text_depth, .max_values = limits.max_text_values},
          "json schema");
      !s.ok()) {
    return s;
  }
  // A map-keyed parse first (n log n whatever the shape) prices the ordered one.
  const nlohmann::json unordered = nlohmann::json::parse(schema.begin(), schema.end(), nullptr,
                                                         /*allow_exceptions=*/false);
  if (unordered.is_discarded()) return absl::InvalidArgumentError("json schema: not valid JSON");
  const Shape shape = ShapeOf(unordered);
  if (shape.depth > limits.max_text_depth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "json schema: nests ", shape.depth, " levels deep; at most ", limits.max_text_depth));
  }
  if (shape.member_work > limits.max_member_work) {
    return absl::InvalidArgumentError(
        absl::StrCat("json schema: its objects are too large (the sum of their member counts "
                     "squared is ",
                     shape.member_work, "; at most ", limits.max_member_work, ")"));
  }
  const Json root = Json::parse(schema.begin(), schema.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError("json schema: not valid JSON");
  Compiler compiler(root, limits);
  auto top = compiler.Compile(root, "", 0);
  if (!top.ok()) return top.status();
  if (compiler.builder().over_limit()) {
    return Bad("schema", "", absl::StrCat("grammar over ", limits.max_elements, " elements"));
  }
  auto grammar = std::move(compiler.builder()).Build(*top);
  if (!grammar.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("json schema: ", grammar.status().message()));
  }
  return std::make_shared<const Grammar>(*std::move(grammar));
}

}  // namespace pagoda::grammar
