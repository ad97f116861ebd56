// Every reference rendering made by llama.cpp's server (scripts/refs/
// make_chat_template_refs.py) must come out byte for byte.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "tests/test_util.h"

namespace pagoda::chat {
namespace {

std::vector<std::string> ReferenceFiles() {
  std::vector<std::string> out;
  std::string dir = testing::ModelPath("chat_templates");
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ChatTemplateRefs, AtLeastTenTemplatesTimesFourConversations) {
  std::vector<std::string> files = ReferenceFiles();
  ASSERT_GE(files.size(), 10u) << "reference data missing under "
                               << testing::ModelPath("chat_templates");
  for (const std::string& f : files) {
    nlohmann::json ref = nlohmann::json::parse(testing::ReadFileOrDie(f));
    EXPECT_GE(ref["cases"].size(), 4u) << f;
  }
}

// The clock the references were rendered at: noon, local time, of the day llama.cpp's
// server was given as date_string ("01 Dec 2026"), so strftime_now() gives that day in
// any time zone and on any date the suite runs.
std::time_t ReferenceClock(const nlohmann::json& ref) {
  const std::string day = ref["context"]["date_string"].get<std::string>();
  std::tm tm{};
  const char* end = strptime(day.c_str(), "%d %b %Y", &tm);
  EXPECT_TRUE(end != nullptr && *end == '\0') << "date_string " << day;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

class ChatTemplateRefTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateRefTest, MatchesLlamaServer) {
  nlohmann::json ref = nlohmann::json::parse(testing::ReadFileOrDie(GetParam()));
  std::string source = testing::ReadFileOrDie(
      testing::ModelPath("chat_templates/" + ref["template"].get<std::string>()));
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::Parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  for (const auto& c : ref["cases"]) {
    RenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    options.bos_token = ref["bos_token"].get<std::string>();
    options.eos_token = ref["eos_token"].get<std::string>();
    options.strip_leading_bos = ref["strip_leading_bos"].get<bool>();
    options.extra_context = ref["context"];
    options.now = ReferenceClock(ref);
    absl::StatusOr<std::string> got = tmpl->RenderJson(c["messages"], options);
    ASSERT_TRUE(got.ok()) << c["name"] << ": " << got.status();
    EXPECT_EQ(*got, c["prompt"].get<std::string>()) << c["name"];
  }
}

// Every prefix of a real template (cut every 37 bytes) and the template with one byte
// dropped there either parses and renders or gives an error: never a crash or a hang
// (meaningful under the sanitizer build).
TEST_P(ChatTemplateRefTest, DamagedTemplatesFailCleanly) {
  nlohmann::json ref = nlohmann::json::parse(testing::ReadFileOrDie(GetParam()));
  std::string source = testing::ReadFileOrDie(
      testing::ModelPath("chat_templates/" + ref["template"].get<std::string>()));
  RenderOptions options;
  options.now = 0;
  const nlohmann::json& messages = ref["cases"][2]["messages"];
  int parsed = 0;
  for (size_t cut = 0; cut < source.size(); cut += 37) {
    for (std::string damaged :
         {source.substr(0, cut), source.substr(0, cut) + source.substr(cut + 1)}) {
      absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(damaged);
      if (!t.ok()) {
        EXPECT_FALSE(t.status().message().empty());
        continue;
      }
      ++parsed;
      absl::StatusOr<std::string> out = t->RenderJson(messages, options);
      if (!out.ok()) {
        EXPECT_FALSE(out.status().message().empty());
      }
    }
  }
  EXPECT_GT(parsed, 0);
}

std::string CaseName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatTemplateRefTest, ::testing::ValuesIn(ReferenceFiles()),
                         CaseName);

}  // namespace
}  // namespace pagoda::chat
