// The grammar engine on hand-written inputs: the JSON Schema compiler's refusals (keyword
// named), exact accept/reject of texts by the matcher, and the token mask on a tiny
// vocabulary. The real vocabularies are in grammar_mask_test.cc.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "gtest/gtest.h"

namespace pagoda::grammar {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Grammar> MustCompile(const std::string& schema) {
  auto g = CompileJsonSchema(schema);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : JsonObjectGrammar();
}

// True when `text` is a whole sentence of `g`.
bool Matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return m.Advance(text) && m.CanEnd();
}

// True when `text` is a prefix of some sentence of `g`.
bool IsPrefix(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return m.Advance(text);
}

constexpr char kPerson[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 4},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
    "active": {"type": "boolean"}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})";

TEST(JsonSchemaTest, RefusesUnsupportedKeywordsByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "integer", "minimum": 3})", "'minimum' at /"},
      {R"({"type": "object", "properties": {"a": {"type": "number", "multipleOf": 2}}})",
       "'multipleOf' at /properties/a"},
      {R"({"type": "array", "prefixItems": [{"type": "string"}]})", "'prefixItems'"},
      {R"({"type": "array", "uniqueItems": true})", "'uniqueItems'"},
      {R"({"type": "object", "minProperties": 1})", "'minProperties'"},
      {R"({"not": {"type": "string"}})", "'not'"},
      {R"({"type": "string", "format": "email"})", "'format' at /: unsupported format 'email'"},
      {R"({"if": {}, "then": {}})", "'if'"},
  };
  for (const auto& [schema, message] : cases) {
    auto g = CompileJsonSchema(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr(message)) << schema;
  }
}

TEST(JsonSchemaTest, RefusesMalformedSchemas) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not valid JSON"},
      {R"({"$ref": "#/$defs/missing"})", "dangling reference"},
      {R"({"$ref": "https://example.com/s.json"})", "only local references"},
      {R"({"type": "object", "required": ["x"]})", "names 'x', not in 'properties'"},
      {R"({"type": "strin"})", "unknown type 'strin'"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "'maxItems' at /: is below"},
      {R"({"type": "string", "maxLength": 100000})", "over the limit"},
      {R"({"enum": []})", "'enum'"},
      {R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})", "single subschema"},
      {R"({"anyOf": [{"type": "string"}], "minLength": 3})", "'minLength' at /: not supported"},
      {R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}},
           "$ref": "#/$defs/a"})",
       "left-recursive"},
      {"false", "matches nothing"},
  };
  for (const auto& [schema, message] : cases) {
    auto g = CompileJsonSchema(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr(message)) << schema;
  }
}

// Texts a hostile caller could send: nesting past any stack, and objects whose in-order
// parse would cost members squared (50,000 members: seconds).
TEST(JsonSchemaTest, RefusesTextsTooDeepOrWithObjectsTooLarge) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto nested = CompileJsonSchema(absl::StrCat(R"({"const": )", deep, "}"));
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.status().message(),
            "json schema: JSON nests deeper than 160 arrays and objects");
  std::string wide = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 50000; ++i) absl::StrAppend(&wide, i ? "," : "", "\"p", i, "\": {}");
  auto large = CompileJsonSchema(wide + "}}");
  ASSERT_FALSE(large.ok());
  EXPECT_THAT(large.status().message(), HasSubstr("json schema: its objects are too large"));
  // A schema with 500 properties is still fine.
  std::string fine = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 500; ++i) absl::StrAppend(&fine, i ? "," : "", "\"p", i, "\": {}");
  EXPECT_TRUE(CompileJsonSchema(fine + "}}").ok());
}

TEST(JsonSchemaTest, ObjectMembersInOrderOptionalOnesMayBeLeftOut) {
  const auto g = MustCompile(kPerson);
  EXPECT_TRUE(Matches(g, R"({"name":"Al","age":3})"));
  EXPECT_TRUE(Matches(g, R"({"name":"Al","age":-3,"active":true})"));
  EXPECT_TRUE(Matches(g, R"({"name":"Al","age":0,"tags":["x","y"],"active":false})"));
  EXPECT_TRUE(Matches(g, "{\n  \"name\": \"Al\",\n  \"age\": 3\n}"));
  EXPECT_TRUE(Matches(g, R"({ "name" : "Al" , "age" : 3 })"));
  EXPECT_FALSE(Matches(g, R"({"age":3,"name":"Al"})"));            // declared order only
  EXPECT_FALSE(Matches(g, R"({"name":"Al"})"));                    // age is required
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3,"x":1})"));      // no other members
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3,})"));           // no trailing comma
  EXPECT_FALSE(Matches(g, R"({"name":"Alice","age":3})"));         // maxLength 4
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3,"tags":[]})"));  // minItems 1
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3,"tags":["a","b","c"]})"));
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3.5})"));
  EXPECT_FALSE(Matches(g, R"({  "name":"Al","age":3})"));  // one space at most
  EXPECT_FALSE(Matches(g, R"( {"name":"Al","age":3})"));   // nothing before the value
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3} )"));   // nor after it
  EXPECT_TRUE(IsPrefix(g, R"({"name":"Al","age":3)"));
  EXPECT_FALSE(Matches(g, R"({"name":"Al","age":3)"));
}

TEST(JsonSchemaTest, NumbersStringsAndLiterals) {
  const auto num = MustCompile(R"({"type": "number"})");
  for (const char* ok : {"0", "-0", "12", "-0.5", "1e5", "2.25E-12", "3e+7"}) {
    EXPECT_TRUE(Matches(num, ok)) << ok;
  }
  for (const char* bad : {"01", "1.", "+1", ".5", "1e", "1e123", "--1", "NaN"}) {
    EXPECT_FALSE(Matches(num, bad)) << bad;
  }
  const auto str = MustCompile(R"({"type": "string", "minLength": 1, "maxLength": 2})");
  EXPECT_TRUE(Matches(str, "\"\xC3\xA9\xF0\x9F\x99\x82\""));    // é🙂: two characters
  EXPECT_FALSE(Matches(str, "\"a\xC3\xA9\xF0\x9F\x99\x82\""));  // three
  EXPECT_TRUE(Matches(str, R"("\u00e9\n")"));
  EXPECT_FALSE(Matches(str, R"("")"));
  EXPECT_FALSE(Matches(str, R"("\ud800")"));       // a lone surrogate
  EXPECT_FALSE(Matches(str, "\"\x01\""));          // raw control byte
  EXPECT_FALSE(Matches(str, "\"\xC0\x80\""));      // overlong encoding
  EXPECT_FALSE(Matches(str, "\"\xED\xA0\x80\""));  // encoded surrogate
  EXPECT_FALSE(Matches(str, R"("\x")"));
  const auto lit = MustCompile(R"({"enum": ["a\"b", 1.5, null, {"k": [true]}, "Zürich"]})");
  for (const char* ok : {R"("a\"b")", "1.5", "null", R"({"k":[true]})", "\"Z\xC3\xBCrich\""}) {
    EXPECT_TRUE(Matches(lit, ok)) << ok;
  }
  EXPECT_FALSE(Matches(lit, R"({"k": [true]})"));  // enum values are written compactly
  EXPECT_TRUE(Matches(MustCompile(R"({"const": "v1"})"), R"("v1")"));
  EXPECT_FALSE(Matches(MustCompile(R"({"const": "v1"})"), R"("v2")"));
}

TEST(JsonSchemaTest, RefsAnyOfAndRecursion) {
  const auto tree = MustCompile(R"({
    "$defs": {"node": {"type": "object", "properties": {
      "v": {"type": "integer"},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}},
    "$ref": "#/$defs/node"})");
  EXPECT_TRUE(Matches(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(Matches(tree, R"({"v":1,"kids":[{"kids":[]}]})"));
  const auto any = MustCompile(R"({"anyOf": [{"type": "null"}, {"type": "array",
      "items": {"type": ["integer", "boolean"]}, "maxItems": 2}]})");
  EXPECT_TRUE(Matches(any, "null"));
  EXPECT_TRUE(Matches(any, "[1, true]"));
  EXPECT_FALSE(Matches(any, "[1,true,2]"));
  EXPECT_FALSE(Matches(any, R"(["x"])"));
  const auto map =
      MustCompile(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(Matches(map, R"({"a":1,"b":2})"));
  EXPECT_FALSE(Matches(map, R"({"a":"x"})"));
  const auto none = MustCompile(R"({"type": "object", "additionalProperties": false})");
  EXPECT_TRUE(Matches(none, "{}"));
  EXPECT_FALSE(Matches(none, R"({"a":1})"));
}

TEST(JsonSchemaTest, PatternsAndFormats) {
  const auto code = MustCompile(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}(-x)?$"})");
  EXPECT_TRUE(Matches(code, R"("AB-123")"));
  EXPECT_TRUE(Matches(code, R"("ZZ-000-x")"));
  EXPECT_FALSE(Matches(code, R"("Ab-123")"));
  EXPECT_FALSE(Matches(code, R"("AB-123-")"));
  const auto search = MustCompile(R"({"type": "string", "pattern": "ab+c"})");  // unanchored
  EXPECT_TRUE(Matches(search, R"("xxabbbcyy")"));
  EXPECT_TRUE(Matches(search, R"("abc")"));
  EXPECT_FALSE(Matches(search, R"("xxacyy")"));
  const auto quote = MustCompile(R"({"type": "string", "pattern": "^[^a]\\.\"$"})");
  EXPECT_TRUE(Matches(quote, R"("\\.\"")"));  // [^a] took a backslash, written escaped
  EXPECT_TRUE(Matches(quote, R"("b.\"")"));
  EXPECT_FALSE(Matches(quote, R"("a.\"")"));
  const auto date = MustCompile(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(Matches(date, R"("2024-02-29")"));
  EXPECT_FALSE(Matches(date, R"("2024-13-01")"));
  const auto dt = MustCompile(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(Matches(dt, R"("2024-02-29T23:59:07.123Z")"));
  EXPECT_TRUE(Matches(dt, R"("2024-02-29T03:04:05+01:30")"));
  EXPECT_FALSE(Matches(dt, R"("2024-02-29 03:04:05Z")"));
  const auto uuid = MustCompile(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(Matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(Matches(uuid, R"("123e4567e89b12d3a456426614174000")"));
  for (const char* bad : {"(?=a)", "a{1,999}", "[", "(a", "a)", "\\\\p{L}", "a*?"}) {
    const std::string schema = std::string(R"({"type": "string", "pattern": ")") + bad + "\"}";
    auto g = CompileJsonSchema(schema);
    ASSERT_FALSE(g.ok()) << bad;
    EXPECT_THAT(g.status().message(), HasSubstr("'pattern' at /")) << bad;
  }
}

TEST(JsonObjectTest, AnyObjectOnly) {
  const auto g = JsonObjectGrammar();
  EXPECT_TRUE(Matches(g, "{}"));
  EXPECT_TRUE(Matches(g, R"({"a":[1,{"b":null},"c",-2.5e3,true],"d":{}})"));
  EXPECT_FALSE(Matches(g, "[1]"));
  EXPECT_FALSE(Matches(g, R"("text")"));
  EXPECT_FALSE(Matches(g, R"({"a":1,})"));
  EXPECT_FALSE(Matches(g, R"({a:1})"));
}

TEST(MatcherTest, AdvanceRefusesWithoutChangingStateAndCompactKeepsIt) {
  Matcher m(MustCompile(kPerson));
  ASSERT_TRUE(m.Advance(R"({"name":"Al","age":)"));
  const Matcher::Snapshot snap = m.Save();
  EXPECT_FALSE(m.Advance("x"));
  EXPECT_FALSE(m.Advance("1x"));
  ASSERT_TRUE(m.Advance("12"));
  EXPECT_TRUE(m.Advance("}"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.IsDone());
  m.Restore(snap);
  EXPECT_FALSE(m.CanEnd());
  m.Compact();
  EXPECT_TRUE(m.Advance(R"(7,"tags":["a"]})"));
  EXPECT_TRUE(m.CanEnd());
  // A long generation keeps a small state once compacted.
  Matcher s(JsonObjectGrammar());
  ASSERT_TRUE(s.Advance(R"({"k":[)"));
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(s.Advance("[1,"));
    ASSERT_TRUE(s.Advance("2],"));
    s.Compact();
  }
  EXPECT_LT(s.arena_size(), 16u);
}

TEST(MatcherTest, AmbiguityIsBoundedByMaxHeads) {
  // Two identical branches at every level: the heads double with each '['.
  const auto g = MustCompile(R"({"$defs": {"a": {"anyOf": [
      {"type": "array", "items": {"$ref": "#/$defs/a"}},
      {"type": "array", "items": {"$ref": "#/$defs/a"}}]}}, "$ref": "#/$defs/a"})");
  Matcher m(g);
  EXPECT_TRUE(m.Advance("[[[[[]]]]]"));
  EXPECT_TRUE(m.CanEnd());
  Matcher deep(g);
  int accepted = 0;
  while (accepted < 64 && deep.Advance("[")) ++accepted;
  EXPECT_LT(accepted, 64);
  EXPECT_LE(deep.num_heads(), Matcher::kMaxHeads);
  // Refused for the limit, said so: not a byte the grammar refuses.
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(TokenMaskTest, TinyVocabularyExact) {
  // 0 "{" 1 "{\"" 2 "\"" 3 "a" 4 "\":" 5 "1" 6 "}" 7 "" (control) 8 eos "" 9 "x" 10 "1}"
  const std::vector<std::string> vocab = {"{", "{\"", "\"", "a", "\":", "1",
                                          "}", "",    "",   "x", "1}"};
  TokenMasker masker(vocab, {8});
  Matcher m(MustCompile(R"({"type": "object", "properties": {"a": {"type": "integer"}},
                            "required": ["a"]})"));
  auto allowed = [&] {
    TokenBitmask mask;
    EXPECT_TRUE(masker.FillMask(&m, &mask).ok());
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < masker.vocab_size(); ++id) {
      if (MaskAllows(mask, id)) ids.push_back(id);
    }
    return ids;
  };
  EXPECT_EQ(allowed(), (std::vector<int32_t>{0, 1}));
  ASSERT_TRUE(m.Advance("{"));
  EXPECT_EQ(allowed(), (std::vector<int32_t>{2}));
  ASSERT_TRUE(m.Advance("\"a"));
  EXPECT_EQ(allowed(), (std::vector<int32_t>{2, 4}));
  ASSERT_TRUE(m.Advance("\":"));
  EXPECT_EQ(allowed(), (std::vector<int32_t>{5, 10}));
  ASSERT_TRUE(m.Advance("1}"));
  EXPECT_EQ(allowed(), (std::vector<int32_t>{8}));
}

}  // namespace
}  // namespace pagoda::grammar
