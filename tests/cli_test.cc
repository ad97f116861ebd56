// The `pagoda` binary as a user runs it: generate (single prompt, prompts file, cache
// off, block sizes), make-model, the built-in default model, and bad input.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace pagoda {
namespace {

struct Result {
  int exit_code;
  std::string out;
};

// Runs `pagoda <args>` (stderr to stdout when `merge_stderr`).
Result Pagoda(const std::string& args, bool merge_stderr = false) {
  const std::string cmd =
      absl::StrCat(testing::BinDir(), "/pagoda ", args, merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string Stories() { return testing::ModelPath("stories260K.gguf"); }

nlohmann::json Golden() {
  return nlohmann::json::parse(
      testing::ReadFileOrDie(testing::ModelPath("stories260K.golden.json")));
}

TEST(CliTest, GenerateJsonMatchesGolden) {
  const auto golden = Golden().at("cases");
  for (const std::string flags : {"", "--kv-cache off", "--block-size 1", "--block_size=32"}) {
    for (const auto& c : golden) {
      const Result r = Pagoda(absl::StrCat("generate --model ", Stories(), " --prompt '",
                                           c.at("prompt").get<std::string>(),
                                           "' --max-tokens 64 --temperature 0 --json ", flags));
      ASSERT_EQ(r.exit_code, 0) << flags;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j.at("prompt_token_ids"), c.at("prompt_token_ids")) << flags;
      EXPECT_EQ(j.at("output_token_ids"), c.at("output_token_ids")) << flags;
      EXPECT_EQ(j.at("text"), c.at("output_text")) << flags;
    }
  }
}

TEST(CliTest, PromptsFilePrintsOneLinePerPromptInOrder) {
  const std::string dir = testing::MakeTempDir();
  const std::vector<std::string> prompts = {"Once upon a time", "The dog", "", "Lily"};
  {
    std::ofstream f(dir + "/prompts.txt");
    for (const auto& p : prompts) f << p << "\n";
  }
  const std::string common =
      absl::StrCat("generate --model ", Stories(), " --max-tokens 20 --temperature 0");
  const Result all = Pagoda(absl::StrCat(common, " --prompts-file ", dir, "/prompts.txt"));
  ASSERT_EQ(all.exit_code, 0);
  std::vector<std::string> lines = absl::StrSplit(all.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Result one = Pagoda(absl::StrCat(common, " --json --prompt '", prompts[i], "'"));
    EXPECT_EQ(nlohmann::json::parse(lines[i]).at("output_token_ids"),
              nlohmann::json::parse(one.out).at("output_token_ids"))
        << "prompt " << i;
  }
  // The first prompt's 20 tokens are the first 20 golden tokens.
  const auto golden = Golden().at("cases")[0].at("output_token_ids").get<std::vector<int>>();
  EXPECT_EQ(nlohmann::json::parse(lines[0]).at("output_token_ids").get<std::vector<int>>(),
            std::vector<int>(golden.begin(), golden.begin() + 20));
}

TEST(CliTest, MakeModelWritesALoadableDeterministicModel) {
  const std::string dir = testing::MakeTempDir();
  ASSERT_EQ(
      Pagoda(absl::StrCat("make-model --preset tiny --out ", dir, "/a.gguf --seed 5")).exit_code,
      0);
  ASSERT_EQ(
      Pagoda(absl::StrCat("make-model --preset tiny --out ", dir, "/b.gguf --seed 5")).exit_code,
      0);
  EXPECT_EQ(testing::ReadFileOrDie(dir + "/a.gguf"), testing::ReadFileOrDie(dir + "/b.gguf"));
  const std::string gen = absl::StrCat("generate --model ", dir,
                                       "/a.gguf --prompt 'hello' --max-tokens 12 --temperature 0 "
                                       "--ignore-eos --json");
  const Result a = Pagoda(gen), b = Pagoda(gen);
  ASSERT_EQ(a.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(a.out).at("output_token_ids").size(), 12u);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(Pagoda("make-model --preset nope --out /dev/null").exit_code, 0);
}

TEST(CliTest, BuiltInDefaultModelGenerates) {
  const Result r =
      Pagoda("generate --prompt 'hi' --max-tokens 5 --temperature 0 --ignore-eos --json");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out).at("output_token_ids").size(), 5u);
}

TEST(CliTest, BadInputGivesAClearErrorAndNonZeroExit) {
  const std::string dir = testing::MakeTempDir();
  {
    std::ofstream f(dir + "/junk.gguf");
    f << "GGUF this is not a model";
  }
  Result r = Pagoda(absl::StrCat("generate --model ", dir, "/junk.gguf --prompt x"), true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("gguf:"), std::string::npos) << r.out;
  r = Pagoda(absl::StrCat("generate --model ", dir, "/missing.gguf --prompt x"), true);
  EXPECT_EQ(r.exit_code, 1);
  r = Pagoda(absl::StrCat("generate --model ", Stories(), " --prompt x --top-p 7"), true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("top_p"), std::string::npos) << r.out;
  EXPECT_EQ(Pagoda("frobnicate").exit_code, 2);
}

}  // namespace
}  // namespace pagoda
