// The GBNF compiler (grammar/gbnf.h): exact accept/reject of texts by the matcher for an
// arithmetic and a JSON grammar, character classes checked against every code point, `.`
// against valid and invalid UTF-8, repetition bounds, layout (comments, continuation
// lines), and every error's cause and place.
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "gtest/gtest.h"

namespace pagoda::grammar {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Grammar> MustCompile(const std::string& text) {
  auto g = CompileGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << text;
  if (g.ok()) return *g;
  return *CompileGbnf("root ::= \"\\U0010FFFF\\U0010FFFF\"");  // matches nothing tested
}

bool Matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return m.Advance(text) && m.CanEnd();
}

void ExpectLanguage(const std::string& grammar, const std::vector<std::string>& accept,
                    const std::vector<std::string>& reject) {
  const auto g = MustCompile(grammar);
  for (const std::string& text : accept) EXPECT_TRUE(Matches(g, text)) << "accept: " << text;
  for (const std::string& text : reject) EXPECT_FALSE(Matches(g, text)) << "reject: " << text;
}

// Test-side UTF-8 encoder, written independently of grammar/utf8_ranges.
std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

constexpr char kArithmetic[] = R"gbnf(
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")" | "-" factor
number ::= [0-9]+ ("." [0-9]+)?
)gbnf";

TEST(GbnfTest, Arithmetic) {
  ExpectLanguage(kArithmetic,
                 {"1", "1+2*3", "(1+2)*3", "-4.5/2", "((7))", "10-2-3", "--1", "3.14*(2+-1)"},
                 {"", "1+", "*2", "(1+2", "1..2", "1 + 2", "()", "1+2)", ".5", "1."});
}

constexpr char kJson[] = R"gbnf(
# JSON (RFC 8259), written for this test.
root    ::= ws value ws
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member  ::= string ws ":" ws value
array   ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string  ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex{4} ) )* "\""
hex     ::= [0-9a-fA-F]
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n\r]*
)gbnf";

TEST(GbnfTest, Json) {
  ExpectLanguage(
      kJson,
      {R"({"a": [1, -2.5e3, true, null, "x\u00e9\n"], "b": {}})", "[]", "{}", " \"héllo 😀\" ", "0",
       "-0.1E+2", "[[[]]]", "{\n\t\"k\" : \"v\"\r\n}", R"("\"\\\/\b\f\n\r\t")", "false"},
      {R"({"a":1,})", "[01]", "\"abc", "{'a':1}", R"("\x")", "\"a\nb\"", "tru", "[1 2]", "{\"a\"}",
       "\"\\u12G4\"", "-", "1e", "nul", "\"\xC3\"", ""});
}

TEST(GbnfTest, ClassesWithRangesNegationAndMultiByteCodePoints) {
  ExpectLanguage("root ::= [a-z0-9_]", {"a", "z", "0", "9", "_"}, {"A", "-", "", "ab", "é"});
  ExpectLanguage("root ::= [α-ω]", {"α", "λ", "ω"}, {"a", "Α", "ά", "ϊ", "αα"});
  ExpectLanguage(R"(root ::= [^"\\])", {"a", "é", "😀", "\n", std::string(1, '\0')},
                 {"\"", "\\", "", "ab"});
  ExpectLanguage("root ::= [一-龥]", {"一", "龥", "中"}, {"龦", "a", "〇", "一一"});
  ExpectLanguage(R"(root ::= [\U0001F600-\U0001F64F])", {"😀", "🙏", "😎"},
                 {"🙐", "🌀", "\xF0\x9F\x98", "a"});
  ExpectLanguage(R"(root ::= [a-c\u00e9x-z\-])", {"a", "b", "c", "é", "x", "z", "-"},
                 {"d", "w", "e", "\\"});
  ExpectLanguage("root ::= [-a] [b-]", {"-b", "a-", "ab", "--"}, {"bb", "aa"});
  ExpectLanguage(R"(root ::= [\[\]^] [\x41-\x43])", {"[A", "]B", "^C"}, {"\\A", "[D"});
  ExpectLanguage(R"(root ::= [^\x00-\x7F]+)", {"é", "日本", "😀😀"}, {"a", "éa", ""});
}

// Every scalar value's encoding against a membership predicate.
void ExpectClassIs(const std::string& cls, const std::function<bool(uint32_t)>& member) {
  SCOPED_TRACE(cls);
  Matcher m(MustCompile("root ::= " + cls));
  const Matcher::Snapshot start = m.Save();
  int wrong = 0;
  for (uint32_t cp = 0; cp <= 0x10FFFF && wrong < 10; ++cp) {
    if (cp == 0xD800) cp = 0xE000;
    m.Restore(start);
    const bool accepted = m.Advance(Utf8(cp)) && m.CanEnd();
    if (accepted != member(cp)) {
      ADD_FAILURE() << "U+" << std::hex << cp << (accepted ? " accepted" : " rejected");
      ++wrong;
    }
  }
}

TEST(GbnfTest, ClassesAgainstEveryCodePoint) {
  ExpectClassIs("[α-ω]", [](uint32_t c) { return c >= 0x3B1 && c <= 0x3C9; });
  ExpectClassIs(R"([^"\\])", [](uint32_t c) { return c != '"' && c != '\\'; });
  ExpectClassIs("[一-龥]", [](uint32_t c) { return c >= 0x4E00 && c <= 0x9FA5; });
  ExpectClassIs(R"([\U0001F600-\U0001F64F])",
                [](uint32_t c) { return c >= 0x1F600 && c <= 0x1F64F; });
  ExpectClassIs(R"([^a-z\u0800-\uFFFF])",
                [](uint32_t c) { return !(c >= 'a' && c <= 'z') && !(c >= 0x800 && c <= 0xFFFF); });
  ExpectClassIs(R"([\x7F-\u0081\u07FF-\u0801\uD7FF-\uE000\uFFFF-\U00010000\U0010FFFF])",
                [](uint32_t c) {
                  return (c >= 0x7F && c <= 0x81) || (c >= 0x7FF && c <= 0x801) || c == 0xD7FF ||
                         c == 0xE000 || c == 0xFFFF || c == 0x10000 || c == 0x10FFFF;
                });
  ExpectClassIs(R"([^\u0100-\U0010FFFE])", [](uint32_t c) { return c < 0x100 || c == 0x10FFFF; });
  ExpectClassIs(".", [](uint32_t) { return true; });
}

TEST(GbnfTest, DotAcceptsExactlyWellFormedUtf8) {
  const auto g = MustCompile("root ::= .");
  Matcher m(g);
  const Matcher::Snapshot start = m.Save();
  auto accepts = [&](const std::string& s) {
    m.Restore(start);
    return m.Advance(s) && m.CanEnd();
  };
  // Every string of up to three bytes (leads of 3-byte forms only for three) is accepted iff
  // it encodes one scalar value.
  std::set<std::string> valid;
  for (uint32_t cp = 0; cp < 0x10000; ++cp) {
    if (cp < 0xD800 || cp > 0xDFFF) valid.insert(Utf8(cp));
  }
  int wrong = 0;
  auto check = [&](const std::string& s) {
    if (accepts(s) == valid.contains(s)) return;
    ADD_FAILURE() << absl::CEscape(s) << (valid.contains(s) ? " rejected" : " accepted");
    ++wrong;
  };
  for (int a = 0; a < 256 && wrong < 10; ++a) {
    const std::string s1(1, static_cast<char>(a));
    check(s1);
    for (int b = 0; b < 256; ++b) {
      const std::string s2 = s1 + static_cast<char>(b);
      check(s2);
      if (a < 0xE0 || a > 0xEF) continue;
      for (int c = 0; c < 256; ++c) check(s2 + static_cast<char>(c));
    }
  }
  for (const char* bad : {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF",
                          "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF", "\xED\xA0\x80", "\xED\xBF\xBF",
                          "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xF8\x88\x80\x80\x80", "\xFF",
                          "\x80", "\xBF", "\xF0\x9F\x98", "\xF0\x9F\x98\x80\x80", ""}) {
    EXPECT_FALSE(accepts(bad)) << absl::CEscape(bad);
  }
  for (const char* good : {"\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "\xF3\xBF\xBF\xBF",
                           "\xED\x9F\xBF", "\xEE\x80\x80", "\xEF\xBF\xBF", "\xC2\x80"}) {
    EXPECT_TRUE(accepts(good)) << absl::CEscape(good);
  }
}

TEST(GbnfTest, RepetitionBounds) {
  ExpectLanguage(R"(root ::= "a"{2,4})", {"aa", "aaa", "aaaa"}, {"", "a", "aaaaa"});
  ExpectLanguage(R"(root ::= "x" "a"{0} "y")", {"xy"}, {"xay", "x"});
  ExpectLanguage(R"(root ::= "a"{,3})", {"", "a", "aa", "aaa"}, {"aaaa"});
  ExpectLanguage(R"(root ::= "ab"{3})", {"ababab"}, {"abab", "abababab", "aba"});
  ExpectLanguage(R"(root ::= [0-9]{ 2 , })", {"12", "123", std::string(50, '7')}, {"", "1"});
  ExpectLanguage("root ::= item{2} \"!\"? item*\nitem ::= \"x\" | \"yz\"",
                 {"xx", "xyz!", "yzyz!x", "xxx"}, {"x", "x!", "xx!!", "xy"});
  ExpectLanguage(R"(root ::= ("a" | "b")+ "c"?)", {"a", "abba", "bc"}, {"", "c", "abcc"});
  ExpectLanguage(R"(root ::= ("ab" [0-9])* ""* ("")+ "z"{1})", {"z", "ab1z", "ab1ab2z"},
                 {"abz", "ab1", "ab12z"});
  ExpectLanguage(R"(root ::= "a"*? "b"{1,1}{2})", {"bb", "abb", "aaaabb"}, {"b", "bbb"});
  // Counts up to the limit compile.
  ExpectLanguage(R"(root ::= "a"{2048})", {std::string(2048, 'a')},
                 {std::string(2047, 'a'), std::string(2049, 'a')});
}

TEST(GbnfTest, CommentsAndLineContinuation) {
  const std::string text =
      "# leading comment\n"
      "\n"
      "root ::= a   # trailing comment\n"
      "  | b        # a continuation line\n"
      "  # a comment line between\n"
      "\n"
      "  | \"c\" (\n"
      "    \"d\" # newlines inside parentheses\n"
      "    | \"e\"\n"
      "  )\n"
      "  | \"#\" \"\\u0023\"\r\n"
      "a ::=\n"
      "  \"a\" |\n"
      "  \"A\"\n"
      "b ::= \"b\"";
  ExpectLanguage(text, {"a", "A", "b", "cd", "ce", "##"}, {"c", "d", "e", "#", "", "ab"});
}

TEST(GbnfTest, EmptyAlternativesAndRulesUsedBeforeDefinition) {
  ExpectLanguage("root ::= \"a\" ws \"b\"\nws ::= | \" \" | \"\\n\" [ \\t]{0,3}",
                 {"ab", "a b", "a\nb", "a\n\t\t b"}, {"a  b", "a\n    b", "a\tb"});
  ExpectLanguage("root ::= (\"x\" | ) \"y\" ( | \"z\")", {"y", "xy", "yz", "xyz"}, {"", "xz"});
}

TEST(GbnfTest, LiteralEscapesAndUtf8) {
  ExpectLanguage(R"(root ::= "\n\r\t\\\"\'\[\]\x41\u00e9\U0001F600" "日本")",
                 {"\n\r\t\\\"'[]Aé😀日本"}, {"\n\r\t\\\"'[]Aé😀日"});
  ExpectLanguage(R"(root ::= "\xFF")", {"\xC3\xBF"}, {"\xFF"});  // \xHH is U+00HH
}

void ExpectError(const std::string& text, const std::string& cause, const std::string& where,
                 const GbnfLimits& limits = {}) {
  auto g = CompileGbnf(text, limits);
  ASSERT_FALSE(g.ok()) << text;
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("gbnf: " + where + ": ")) << text;
  EXPECT_THAT(g.status().message(), HasSubstr(cause)) << text;
}

TEST(GbnfTest, Errors) {
  ExpectError("root ::= foo\n", "undefined rule 'foo'", "1:10");
  ExpectError("root ::= a\na ::= \"x\" b-2 | c\n", "undefined rule 'b-2'", "2:11");
  ExpectError("a ::= \"x\"\n", "missing rule 'root'", "1:1");
  ExpectError("", "missing rule 'root'", "1:1");
  ExpectError("root ::= \"abc", "unterminated literal", "1:10");
  ExpectError("root ::= \"a\"\n  | [abc", "unterminated character class", "2:5");
  ExpectError("root ::= (\"a\" | \"b\"", "unterminated group", "1:10");
  ExpectError("root ::= \"a\\qb\"", "bad escape '\\q'", "1:12");
  ExpectError("root ::= [\\xZ1]", "bad escape '\\x': expected 2 hex digits", "1:11");
  ExpectError("root ::= \"\\uD800\"", "U+D800 is not a Unicode scalar value", "1:11");
  ExpectError("root ::= \"\\U00110000\"", "U+110000 is not a Unicode scalar value", "1:11");
  ExpectError("root ::= [z-a]", "bad class range: U+007A is above U+0061", "1:11");
  ExpectError("root ::= [^\\x00-\\U0010FFFF]", "character class matches nothing", "1:10");
  ExpectError("root ::= \"a\"{3,2}", "bad repetition bounds", "1:13");
  ExpectError("root ::= \"a\"{}", "bad repetition bounds: expected a count", "1:13");
  ExpectError("root ::= \"a\"{,}", "bad repetition bounds", "1:13");
  ExpectError("root ::= \"a\"{2", "bad repetition bounds: expected '}'", "1:13");
  ExpectError("root ::= \"a\"{2049}", "repetition count 2049 is over the limit of 2048", "1:13");
  ExpectError("root ::= \"a\"\nroot ::= \"b\"", "rule 'root' is defined twice (first at 1:1)",
              "2:1");
  ExpectError("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", "rule 'expr' is left-recursive",
              "2:1");
  ExpectError("root ::= x\nx ::= (\"\" | \"a\")* \"b\"", "rule 'x' is left-recursive", "2:1");
  ExpectError("root ::= \"a\" )", "unexpected ')'", "1:14");
  ExpectError("root = \"a\"", "expected '::=' after rule name 'root'", "1:6");
  ExpectError("root ::= \"a\"\n::= \"b\"", "unexpected ':': expected a rule name", "2:1");
  ExpectError("root ::= \"\xC3\x28\"", "invalid UTF-8", "1:11");
  ExpectError("root ::= \"a\" @", "unexpected '@'", "1:14");
  ExpectError("root ::= \"a\" \"b\" ::= \"c\"", "unexpected ':'", "1:18");
  // Limits.
  GbnfLimits small;
  small.max_text_bytes = 16;
  ExpectError("root ::= \"abcdefgh\"", "grammar text of 19 bytes is over the limit of 16", "1:1",
              small);
  GbnfLimits few;
  few.max_elements = 100;
  ExpectError("root ::= \"a\"{50} \"b\"{50}", "grammar over 100 elements", "1:21", few);
  GbnfLimits shallow;
  shallow.max_depth = 3;
  ExpectError("root ::= ((((\"a\"))))", "parentheses nested deeper than 3", "1:13", shallow);
  ExpectError("root ::= " + std::string(100000, '('), "over the limit of 65536", "1:1");
  GbnfLimits repeats;
  repeats.max_repeat = 10;
  ExpectError("root ::= \"a\"{11}", "repetition count 11 is over the limit of 10", "1:13", repeats);
}

TEST(GbnfTest, DeepNestingWithinTheLimitCompiles) {
  ExpectLanguage("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')'), {"a"},
                 {"", "aa"});
}

}  // namespace
}  // namespace pagoda::grammar
