// Tools in chat templates (chat::RenderOptions::tools, chat::ToolsTemplateJson): Qwen2.5's
// real template rendered with tools, an assistant tool call and a tool result, against the
// text Hugging Face's renderer gives (jinja2 3.1, trim_blocks and lstrip_blocks,
// tojson = json.dumps(ensure_ascii=False)) for the same conversation; the tools' strings
// are content spans.
#include <string>

#include "chat/chat_template.h"
#include "chat/tool_definitions.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace pagoda::chat {
namespace {

// Keys in the request's order do not matter: ToolsTemplateJson writes its own.
constexpr char kTools[] = R"([
  {"function": {"parameters": {"required": ["city"], "type": "object", "properties": {
      "unit": {"enum": ["c", "f"], "type": "string"},
      "city": {"description": "e.g. Paris", "type": "string"}}},
    "description": "The weather in a city, now.", "name": "get_weather"}, "type": "function"},
  {"type": "function", "function": {"name": "now"}}])";

constexpr char kSystem[] =
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
    "query.\n\nYou are provided with function signatures within <tools></tools> XML "
    "tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"description\": \"The weather in a city, now.\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\", \"description\": \"e.g. Paris\"}, "
    "\"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"]}}, \"required\": "
    "[\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"now\"}}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

ChatTemplate Qwen25() {
  auto t = ChatTemplate::Parse(pagoda::testing::ReadFileOrDie(
      pagoda::testing::ModelPath("chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja")));
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

RenderOptions WithTools() {
  auto tools = ParseToolDefinitions(nlohmann::json::parse(kTools));
  EXPECT_TRUE(tools.ok()) << tools.status();
  RenderOptions options;
  options.tools = ToolsTemplateJson(*tools);
  return options;
}

TEST(ChatTemplateToolsTest, Qwen25RendersToolsCallsAndResults) {
  const ChatTemplate t = Qwen25();
  const nlohmann::json messages = nlohmann::json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"}])");
  auto out = t.RenderJson(messages, WithTools());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, std::string(kSystem) +
                      "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                      "\"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
                      "{\"temp\": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateToolsTest, WithoutToolsTheSystemPromptIsTheUsualOne) {
  const ChatTemplate t = Qwen25();
  auto out = t.Render({{"user", "Hi"}}, RenderOptions{});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateToolsTest, ToolStringsAreContent) {
  const ChatTemplate t = Qwen25();
  RenderOptions options = WithTools();
  auto out = t.RenderWithSpans({{"user", "Hi"}}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->text.substr(0, std::string(kSystem).size()), kSystem);
  // Every string of the tools (names, descriptions, schema keys and values) lies inside a
  // content span; the template's own text around them does not.
  const auto in_content = [&](const std::string& s) {
    const size_t at = out->text.find(s);
    if (at == std::string::npos) return false;
    for (const Span& span : out->content) {
      if (span.begin <= at && at + s.size() <= span.end) return true;
    }
    return false;
  };
  EXPECT_TRUE(in_content("The weather in a city, now."));
  EXPECT_TRUE(in_content("get_weather"));
  EXPECT_TRUE(in_content("e.g. Paris"));
  EXPECT_FALSE(in_content("# Tools"));
}

}  // namespace
}  // namespace pagoda::chat
