// The Jinja subset of chat/: exact outputs of each construct, and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "chat/chat_template.h"
#include "tests/test_util.h"

namespace pagoda::chat {
namespace {

using ::testing::HasSubstr;

// Noon of 1970-01-01 in the local time zone: strftime_now() shows that day in any zone.
std::time_t LocalNoonOfEpochDay() {
  std::tm tm{};
  tm.tm_year = 70;
  tm.tm_mday = 1;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

// Renders `source` with `context` as extra variables (no messages).
absl::StatusOr<std::string> Render(const std::string& source,
                                   nlohmann::json context = nlohmann::json::object()) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(source);
  if (!t.ok()) return t.status();
  RenderOptions options;
  options.add_generation_prompt = false;
  options.extra_context = std::move(context);
  options.now = LocalNoonOfEpochDay();
  return t->RenderJson(nlohmann::json::array(), options);
}

std::string Ok(const std::string& source, nlohmann::json context = nlohmann::json::object()) {
  absl::StatusOr<std::string> out = Render(source, std::move(context));
  EXPECT_TRUE(out.ok()) << source << " -> " << out.status();
  return out.ok() ? *out : "<error>";
}

TEST(ChatJinja, TextAndExpressions) {
  EXPECT_EQ(Ok("plain"), "plain");
  EXPECT_EQ(Ok("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 10 }}"),
            "7|3|-4|1|1024");
  EXPECT_EQ(Ok("{{ 7 / 2 }}|{{ 1.5 + 1 }}|{{ 3.0 }}"), "3.5|2.5|3.0");
  EXPECT_EQ(Ok("{{ 1 ~ none ~ true }}"), "1NoneTrue");
  // llama.cpp: none or undefined next to a string concatenates as empty.
  EXPECT_EQ(Ok("{{ 'a' ~ none ~ true }}{{ none ~ 'b' }}"), "aTrueb");
  EXPECT_EQ(Ok("{{ 'ab' + 'cd' }}{{ 'x' * 3 }}"), "abcdxxx");
  EXPECT_EQ(Ok("{{ \"q\\\"uote\\n\" }}"), "q\"uote\n");
  EXPECT_EQ(Ok("{{ 'a' 'b' }}"), "ab");
  EXPECT_EQ(Ok("{{ [1, 'a', none] }}{{ {'k': 1} }}"), "[1, 'a', None]{'k': 1}");
  EXPECT_EQ(Ok("{{ 1 < 2 and 2 <= 2 and not 3 > 4 and 1 != 2 }}"), "True");
  EXPECT_EQ(Ok("{{ 0 or 'x' }}{{ 'y' and '' }}"), "x");
  EXPECT_EQ(Ok("{{ 'yes' if x else 'no' }}{{ 'z' if false }}", {{"x", 1}}), "yes");
}

TEST(ChatJinja, UndefinedAndNone) {
  EXPECT_EQ(Ok("[{{ missing }}]"), "[]");
  EXPECT_EQ(Ok("[{{ missing.attr }}][{{ missing['k'] }}]"), "[][]");  // llama.cpp: lenient
  EXPECT_EQ(Ok("{{ missing is defined }}{{ missing is undefined }}{{ none is none }}"),
            "FalseTrueTrue");
  EXPECT_EQ(Ok("{{ missing ~ 'a' }}{{ 'b' + none }}"), "ab");
  EXPECT_EQ(Ok("{{ 'x' in missing }}{{ 'x' not in missing }}"), "FalseTrue");
  absl::StatusOr<std::string> bad = Render("{{ missing + 1 }}");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> none_attr = Render("\n{{ x.y }}", {{"x", nullptr}});
  EXPECT_EQ(none_attr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none_attr.status().message(), HasSubstr("line 2"));
}

TEST(ChatJinja, WhitespaceControl) {
  // trim_blocks: a newline after %} goes; lstrip_blocks: indentation before {% goes.
  EXPECT_EQ(Ok("{% if true %}\n  a\n  {% endif %}\nb"), "  a\nb");
  EXPECT_EQ(Ok("x  {{- 'y' -}}  \n z"), "xyz");
  EXPECT_EQ(Ok("a\n  {%- if true -%}\n  b  {%- endif %}"), "ab");
  EXPECT_EQ(Ok("{{ 'a' }}\n{{ 'b' }}"), "a\nb");  // }} keeps its newline
  EXPECT_EQ(Ok("a {# note #}\nb {#- x -#} c"), "a bc");
  EXPECT_EQ(Ok("  {% if true %}x{% endif %}\n  {{ 'y' }}"), "x  y");  // {{ keeps indentation
  EXPECT_EQ(Ok("line\n"), "line");  // one trailing newline of the source goes
  EXPECT_EQ(Ok("a\r\nb"), "a\nb");
}

TEST(ChatJinja, ForLoops) {
  nlohmann::json ctx = {{"xs", {"a", "b", "c"}}};
  EXPECT_EQ(Ok("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}"
               "{% endfor %}",
               ctx),
            "1a,2b,3c");
  EXPECT_EQ(Ok("{% for x in xs %}{{ loop.index0 }}{{ loop.first }}{{ loop.length }}"
               "{{ loop.revindex }} {% endfor %}",
               ctx),
            "0True33 1False32 2False31 ");
  EXPECT_EQ(Ok("{% for x in xs if x != 'b' %}{{ loop.index }}{{ x }}{% endfor %}", ctx), "1a2c");
  EXPECT_EQ(Ok("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Ok("{% for x in xs %}{% if x == 'b' %}{% break %}{% endif %}{{ x }}{% endfor %}", ctx),
            "a");
  EXPECT_EQ(Ok("{% for x in xs %}{% if x == 'b' %}{% continue %}{% endif %}{{ x }}"
               "{% endfor %}",
               ctx),
            "ac");
  EXPECT_EQ(
      Ok("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"a", 1}, {"b", 2}}}}),
      "a=1;b=2;");
  EXPECT_EQ(Ok("{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(5, 1, -2) %}"
               "{{ i }}{% endfor %}"),
            "01253");
  EXPECT_EQ(Ok("{% for x in missing %}x{% endfor %}."), ".");
}

TEST(ChatJinja, SetScopesAndNamespaces) {
  EXPECT_EQ(Ok("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(Ok("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}"
               "{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(Ok("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(Ok("{% set block %}in{{ 1 }}{% endset %}[{{ block }}]"), "[in1]");
  EXPECT_EQ(Ok("{% if true %}{% set y = 'set in if' %}{% endif %}{{ y }}"), "set in if");
}

TEST(ChatJinja, Conditions) {
  const char* t = "{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(Ok(t, {{"x", 1}}), "one");
  EXPECT_EQ(Ok(t, {{"x", 2}}), "two");
  EXPECT_EQ(Ok(t, {{"x", 3}}), "many");
  EXPECT_EQ(Ok("{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in {'k': 0} }}{{ 3 not in [3] }}"),
            "TrueTrueTrueFalse");
}

TEST(ChatJinja, Macros) {
  EXPECT_EQ(Ok("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
               "{{ greet('Ann') }} {{ greet('Bo', punct='?') }}"),
            "Hi Ann! Hi Bo?");
  EXPECT_EQ(Ok("{% macro wrap() %}[{{ caller() }}]{% endmacro %}"
               "{% call wrap() %}inner{% endcall %}"),
            "[inner]");
}

TEST(ChatJinja, Filters) {
  EXPECT_EQ(Ok("{{ '  a b \n' | trim }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}"), "a b|ABab");
  EXPECT_EQ(Ok("{{ [1, 2, 3] | length }}{{ 'abcd' | length }}{{ {'a': 1} | length }}"), "341");
  EXPECT_EQ(Ok("{{ 'a-b-c' | replace('-', '+') }}{{ [1, 2] | join(', ') }}"), "a+b+c1, 2");
  EXPECT_EQ(Ok("{{ missing | default('d') }}{{ '' | default('e', true) }}{{ 0 | default(5) }}"),
            "de0");
  EXPECT_EQ(Ok("{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}{{ 12 | string }}"), "1312");
  EXPECT_EQ(Ok("{{ {'a': 1, 'b': [true, none]} | tojson }}"), "{\"a\": 1, \"b\": [true, null]}");
  EXPECT_EQ(Ok("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(Ok("{{ 'é\"\n' | tojson }}"), "\"é\\\"\\n\"");
  EXPECT_EQ(Ok("{% for k, v in {'x': 1} | items %}{{ k }}{{ v }}{% endfor %}"), "x1");
  EXPECT_EQ(Ok("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | list }}",
               {{"ms", {{{"role", "user"}, {"c", "u1"}}, {{"role", "tool"}, {"c", "t"}}}}}),
            "['u1']");
  EXPECT_EQ(Ok("{{ [3, 1, 2] | sort | join }}{{ [1, 2] | reverse | join }}{{ 'hi' | capitalize }}"),
            "12321Hi");
  EXPECT_EQ(Ok("{{ 'a\nb' | indent(2) }}|{{ '3' | int + 1 }}|{{ [1, 2.5] | sum }}"),
            "a\n  b|4|3.5");
}

TEST(ChatJinja, StringAndContainerMethods) {
  EXPECT_EQ(Ok("{{ '  x  '.strip() }}|{{ 'xxyxx'.lstrip('x') }}|{{ 'ab  '.rstrip() }}"),
            "x|yxx|ab");
  EXPECT_EQ(Ok("{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x', 'lo')) }}"), "TrueTrue");
  EXPECT_EQ(Ok("{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a/b/c'.rsplit('/', 1) }}"),
            "['a', 'b', '', 'c']['a', 'b']['a/b', 'c']");
  EXPECT_EQ(Ok("{{ 'abc'.upper() }}{{ 'x-y'.replace('-', '') }}{{ 'abc'.find('c') }}"), "ABCxy2");
  EXPECT_EQ(Ok("{{ d.get('a') }}{{ d.get('z', 'none') }}{{ d.keys() | list }}{{ d['a'] }}",
               {{"d", {{"a", 5}}}}),
            "5none['a']5");
  EXPECT_EQ(Ok("{{ '<{}|{1}|{k}>{{x}}'.format('a', 'b', k='c') }}"), "<a|b|c>{x}");
  EXPECT_EQ(Ok("{% set xs = [] %}{% set _ = xs.append(1) %}{{ xs }}"), "[1]");
}

TEST(ChatJinja, IndexingAndSlicing) {
  nlohmann::json ctx = {{"xs", {1, 2, 3, 4}}, {"s", "hello"}};
  EXPECT_EQ(Ok("{{ xs[0] }}{{ xs[-1] }}{{ xs[1:] }}{{ xs[:2] }}{{ xs[::-1] }}{{ xs[1:-1] }}", ctx),
            "14[2, 3, 4][1, 2][4, 3, 2, 1][2, 3]");
  EXPECT_EQ(Ok("{{ s[1:3] }}{{ s[-3:] }}{{ s[0] }}[{{ xs[10] }}]", ctx), "ellloh[]");
}

TEST(ChatJinja, Tests) {
  EXPECT_EQ(Ok("{{ 'a' is string }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}"
               "{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is not string }}{{ 4 is even }}"
               "{{ 6 is divisibleby 3 }}{{ false is false }}{{ 1 is sameas 1 }}"),
            "TrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrue");
}

TEST(ChatJinja, GlobalsAndMessages) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m['content'] }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}");
  ASSERT_TRUE(t.ok()) << t.status();
  RenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  absl::StatusOr<std::string> out = t->Render({{"user", "hi"}, {"assistant", "yo"}}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<s><user>hi<assistant>yo<assistant></s>");
  options.add_generation_prompt = false;
  options.strip_leading_bos = true;
  EXPECT_EQ(*t->Render({{"user", "hi"}}, options), "<user>hi</s>");
  EXPECT_EQ(Ok("{{ strftime_now('%Y-%m-%d') }}"), "1970-01-01");
  // The renderer never reads the clock: without the caller's, strftime_now() is an error.
  RenderOptions no_clock;
  absl::StatusOr<std::string> unclocked = ChatTemplate::Parse("{{ strftime_now('%Y') }}")
                                              ->RenderJson(nlohmann::json::array(), no_clock);
  ASSERT_FALSE(unclocked.ok());
  EXPECT_THAT(unclocked.status().message(), HasSubstr("no clock"));
}

TEST(ChatJinja, RaiseExceptionCarriesTheMessage) {
  absl::StatusOr<std::string> out =
      Render("ok\n{{ raise_exception('Conversation roles must alternate') }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("Conversation roles must alternate"));
}

TEST(ChatJinja, UnsupportedConstructsAreErrors) {
  absl::StatusOr<std::string> stmt = Render("a\n{% include 'x.jinja' %}");
  EXPECT_EQ(stmt.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(stmt.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(stmt.status().message(), HasSubstr("include"));
  absl::StatusOr<std::string> filter = Render("{{ 'x' | frobnicate }}");
  EXPECT_EQ(filter.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(filter.status().message(), HasSubstr("frobnicate"));
  absl::StatusOr<std::string> test = Render("{{ 1 is prime }}");
  EXPECT_EQ(test.status().code(), absl::StatusCode::kUnimplemented);
  absl::StatusOr<std::string> method = Render("{{ 'a'.zfill(3) }}");
  EXPECT_EQ(method.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(method.status().message(), HasSubstr("zfill"));
  EXPECT_EQ(Render("{% set d = {0: 'a'} %}").status().code(), absl::StatusCode::kUnimplemented);
  absl::StatusOr<std::string> spec = Render("{{ '{:>4}'.format(1) }}");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(spec.status().message(), HasSubstr("format field"));
}

TEST(ChatJinja, HostileInputIsAnErrorNotACrash) {
  EXPECT_EQ(ChatTemplate::Parse("{{ " + std::string(100000, '(') + "1 }}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChatTemplate::Parse("{{ " + std::string(100000, '-') + "1 }}").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string nested;
  for (int k = 0; k < 1000; ++k) nested += "{% if true %}";
  EXPECT_EQ(ChatTemplate::Parse(nested).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ 'x' * 100000000000 }}").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{% for i in range(1000) %}{% for j in range(1000) %}"
                   "{{ 'x' * 100 }}{% endfor %}{% endfor %}")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChatJinja, SyntaxErrorsNameTheLine) {
  for (const char* bad : {"{% if x %}never closed", "{{ 1 + }}", "{% for x %}{% endfor %}",
                          "{{ 'open }}", "{% endif %}", "{# open comment", "{{ 1 }"}) {
    absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(bad);
    EXPECT_FALSE(t.ok()) << bad;
    if (!t.ok()) {
      EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_THAT(t.status().message(), HasSubstr("line 1")) << bad;
    }
  }
}

// Budgets (issue 23, finding 1): a template from an untrusted GGUF file or --chat-template
// FILE gets a bounded number of steps, bytes, value nesting, call depth and evaluation
// nesting; each test below reproduces a template that crashed or hung the daemon before.

// Renders `source` (no messages) with `budget`; the template must parse.
absl::StatusOr<std::string> RenderWithBudget(const std::string& source, RenderBudget budget) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return t.status();
  RenderOptions options;
  options.add_generation_prompt = false;
  options.budget = budget;
  return t->RenderJson(nlohmann::json::array(), options);
}

// Expects InvalidArgument "chat template: <budget> budget (<limit>) exceeded".
void ExpectBudgetExceeded(const absl::StatusOr<std::string>& out, const std::string& budget,
                          int64_t limit) {
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            absl::StrCat("chat template: ", budget, " budget (", limit, ") exceeded"));
  EXPECT_TRUE(IsBudgetExceeded(out.status()));
}

constexpr int64_t kDefaultBytes = RenderBudget().max_bytes;
constexpr int64_t kDefaultSteps = RenderBudget().max_steps;

// Was a stack overflow (SIGSEGV): a list nested a million deep, printed by tojson.
TEST(ChatBudget, DeeplyNestedListIsRefused) {
  // As reported: range(1000000) alone is more than the byte budget.
  ExpectBudgetExceeded(Render("{% set ns = namespace(x=[]) %}{% for i in range(1000000) %}"
                              "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}"),
                       "byte", kDefaultBytes);
  // With a range that fits, the 65th level is refused.
  ExpectBudgetExceeded(Render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                              "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}"),
                       "value depth", 64);
  // Without a namespace, and through append (which a list literal's depth cannot see).
  ExpectBudgetExceeded(Render("{% set x = [] %}{% for i in range(1000) %}{% set x = [x] %}"
                              "{% endfor %}"),
                       "value depth", 64);
  ExpectBudgetExceeded(Render("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}"
                              "{% set new = [] %}{% set _ = new.append(ns.l) %}"
                              "{% set ns.l = new %}{% endfor %}"),
                       "value depth", 64);
  // Input nested deeper than the budget.
  nlohmann::json deep = nlohmann::json::array();
  for (int k = 0; k < 100; ++k) deep = nlohmann::json::array({deep});
  ExpectBudgetExceeded(Render("{{ deep|tojson }}", {{"deep", deep}}), "value depth", 64);
  // A list that would hold itself is an error, not a cycle.
  absl::StatusOr<std::string> cycle = Render("{% set l = [] %}{% set _ = l.append(l) %}");
  EXPECT_EQ(cycle.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cycle.status().message(), HasSubstr("cannot hold itself"));
}

// Was an uncaught std::length_error / std::bad_alloc (SIGABRT).
TEST(ChatBudget, IndentWidthIsChargedBeforeTheAllocation) {
  EXPECT_EQ(Ok("{{ 'x'|indent(-1) }}|{{ 'a\nb'|indent(-1) }}"), "x|a\nb");  // Python: no pad
  ExpectBudgetExceeded(Render("{{ 'x'|indent(100000000000) }}"), "byte", kDefaultBytes);
  ExpectBudgetExceeded(Render("{{ 'a\nb'|indent(9223372036854775807) }}"), "byte", kDefaultBytes);
  ExpectBudgetExceeded(Render("{{ {'a': [1]}|tojson(indent=9223372036854775807) }}"), "byte",
                       kDefaultBytes);
}

// Was an overflow of size * count that passed the check (4 GB RSS, then SIGABRT).
TEST(ChatBudget, StringRepetitionCannotOverflowTheCheck) {
  ExpectBudgetExceeded(Render("{{ 'aaaa' * (2**62) }}"), "byte", kDefaultBytes);
  ExpectBudgetExceeded(Render("{{ 'a' * 9223372036854775807 }}"), "byte", kDefaultBytes);
  EXPECT_EQ(Ok("{{ 'ab' * 3 }}|{{ 'ab' * 0 }}|{{ 'ab' * -2 }}"), "ababab||");
  // Integer arithmetic beyond int64 is an error too (it was undefined behaviour).
  absl::StatusOr<std::string> overflow = Render("{{ 2 ** 64 }}");
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(overflow.status().message(), HasSubstr("integer overflow"));
  EXPECT_EQ(Render("{{ (-9223372036854775807 - 1) // -1 }}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Ok("{{ 2 ** 62 }}|{{ -7 % 3 }}|{{ 7 // -2 }}"), "4611686018427387904|2|-4");
  EXPECT_EQ(
      Ok("{{ range(9223372036854775800, 9223372036854775807, 5)|list }}{{ range(5, 0, -2)|list }}"),
      "[9223372036854775800, 9223372036854775805][5, 3, 1]");
}

// Was 4 GB: the 64 MiB cap covered only the output, not the values built on the way.
TEST(ChatBudget, DoublingAStringOrAListStopsAtTheByteBudget) {
  ExpectBudgetExceeded(Render("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                              "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}"),
                       "byte", kDefaultBytes);
  // Lists, and values kept alive side by side, under a caller's lower budget (fast).
  ExpectBudgetExceeded(RenderWithBudget("{% set ns = namespace(s=[1]) %}{% for i in range(40) %}"
                                        "{% set ns.s = ns.s + ns.s %}{% endfor %}",
                                        {.max_bytes = 1 << 20}),
                       "byte", 1 << 20);
  ExpectBudgetExceeded(RenderWithBudget("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}"
                                        "{% set _ = ns.l.append('x' * 10000 ~ i) %}{% endfor %}",
                                        {.max_bytes = 1 << 20}),
                       "byte", 1 << 20);
  // A caller's lower budget holds just the same.
  ExpectBudgetExceeded(RenderWithBudget("{{ 'x' * 2000 }}", {.max_bytes = 1000}), "byte", 1000);
  EXPECT_EQ(*RenderWithBudget("{{ 'x' * 200 }}", {.max_bytes = 1000}), std::string(200, 'x'));
}

// Were hangs: depth was limited, breadth was not.
TEST(ChatBudget, ExponentialMacrosAndNestedLoopsStopAtTheStepBudget) {
  ExpectBudgetExceeded(Render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}"
                              "{% endif %}{% endmacro %}{{ f(60) }}"),
                       "step", kDefaultSteps);
  // As reported, the inner range is more than the byte budget; with ranges that fit,
  // the iterations run out of steps.
  ExpectBudgetExceeded(Render("{% for i in range(1000000) %}{% for j in range(1000000) %}"
                              "{% endfor %}{% endfor %}"),
                       "byte", kDefaultBytes);
  ExpectBudgetExceeded(RenderWithBudget("{% for i in range(1000) %}{% for j in range(1000) %}"
                                        "{% endfor %}{% endfor %}",
                                        {.max_steps = 100000}),
                       "step", 100000);
  // Calls and nesting have their own budgets.
  ExpectBudgetExceeded(Render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "call depth", 64);
  std::string nested = "{% macro f(n) %}";
  for (int k = 0; k < 90; ++k) nested += "{% if true %}";
  nested += "{{ f(n - 1) }}";
  for (int k = 0; k < 90; ++k) nested += "{% endif %}";
  ExpectBudgetExceeded(Render(nested + "{% endmacro %}{{ f(30) }}"), "nesting", 500);
}

// Every real template in tests/data renders a 201-message conversation (with tools)
// inside a twentieth of the default steps and bytes: the defaults leave a wide margin.
TEST(ChatBudget, RealTemplatesFitWellInsideTheDefaults) {
  nlohmann::json messages = {{{"role", "system"}, {"content", "You are helpful."}}};
  for (int turn = 0; turn < 100; ++turn) {
    messages.push_back({{"role", "user"}, {"content", std::string(200, 'q')}});
    messages.push_back({{"role", "assistant"}, {"content", std::string(200, 'a')}});
  }
  nlohmann::json tools = nlohmann::json::array();
  for (int k = 0; k < 8; ++k) {
    tools.push_back(
        {{"type", "function"},
         {"function",
          {{"name", absl::StrCat("tool", k)},
           {"description", "a tool"},
           {"parameters",
            {{"type", "object"},
             {"properties", {{"a", {{"type", "array"}, {"items", {{"type", "integer"}}}}}}},
             {"required", {"a"}}}}}}});
  }
  int rendered = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::ModelPath("chat_templates"))) {
    if (entry.path().extension() != ".jinja") continue;
    absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(testing::ReadFileOrDie(entry.path()));
    ASSERT_TRUE(t.ok()) << entry.path() << ": " << t.status();
    RenderOptions options;
    options.now = 0;
    options.extra_context = {{"tools", tools}};
    options.budget.max_steps = kDefaultSteps / 20;
    options.budget.max_bytes = kDefaultBytes / 20;
    absl::StatusOr<std::string> out = t->RenderJson(messages, options);
    EXPECT_TRUE(out.ok()) << entry.path() << ": " << out.status();
    ++rendered;
  }
  EXPECT_GE(rendered, 20);
}

}  // namespace
}  // namespace pagoda::chat
