// The `pagoda` binary as a user runs it: generate (single prompt, prompts file, cache
// off, block sizes), make-model, the built-in default model, each command's own flags and
// --help, and bad input.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
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
  for (const std::string flags : {"", "--kv-cache off", "--block-size 1", "--block-size=32"}) {
    for (const auto& c : golden) {
      const Result r = Pagoda(absl::StrCat("generate --model ", Stories(), " --prompt '",
                                           c.at("prompt").get<std::string>(),
                                           "' --max-tokens 64 --temperature 0 --json ",
                                           "--kv-cache-dtype f32 ", flags));
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
  r = Pagoda(absl::StrCat("generate --model ", Stories(),
                          " --prompt x --preemption-mode swap --swap-space 0.000001"),
             true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("swap space of 1073 bytes holds no KV block"), std::string::npos) << r.out;
  EXPECT_EQ(Pagoda("frobnicate").exit_code, 2);
}

bool Has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(CliTest, EachCommandsHelpListsItsOwnFlagsOnly) {
  const Result serve = Pagoda("serve --help");
  ASSERT_EQ(serve.exit_code, 0);
  for (const char* flag : {"--port", "--metrics-port", "--host", "--drain-timeout", "--model",
                           "--device", "--threads", "--num-blocks", "--kv-cache"}) {
    EXPECT_TRUE(Has(serve.out, flag)) << flag << "\n" << serve.out;
  }
  for (const char* flag : {"--temperature", "--prompt", "--max-tokens", "--preset", "--dtype"}) {
    EXPECT_FALSE(Has(serve.out, flag)) << flag << "\n" << serve.out;
  }

  const Result generate = Pagoda("generate --help");
  ASSERT_EQ(generate.exit_code, 0);
  for (const char* flag : {"--prompt", "--prompts-file", "--json", "--server", "--temperature",
                           "--max-tokens", "--stop", "--model", "--device", "--threads"}) {
    EXPECT_TRUE(Has(generate.out, flag)) << flag << "\n" << generate.out;
  }
  for (const char* flag : {"--port", "--metrics-port", "--preset", "--dtype"}) {
    EXPECT_FALSE(Has(generate.out, flag)) << flag << "\n" << generate.out;
  }

  const Result make = Pagoda("make-model --help");
  ASSERT_EQ(make.exit_code, 0);
  for (const char* flag : {"--preset", "--out", "--seed", "--dtype", "F32", "BF16"}) {
    EXPECT_TRUE(Has(make.out, flag)) << flag << "\n" << make.out;
  }
  for (const char* flag : {"--port", "--model", "--device", "--temperature", "--max-tokens"}) {
    EXPECT_FALSE(Has(make.out, flag)) << flag << "\n" << make.out;
  }

  const Result top = Pagoda("--help");
  ASSERT_EQ(top.exit_code, 0);
  for (const char* command : {"serve", "generate", "make-model"}) {
    EXPECT_TRUE(Has(top.out, command)) << command << "\n" << top.out;
  }
  EXPECT_FALSE(Has(top.out, "--port")) << top.out;
  EXPECT_EQ(Pagoda("").exit_code, 2);
}

TEST(CliTest, AFlagOfAnotherCommandIsAnError) {
  const std::string dir = testing::MakeTempDir();
  Result r = Pagoda(absl::StrCat("make-model --out ", dir, "/m.gguf --port 1"), true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Has(r.out, "--port")) << r.out;
  r = Pagoda("serve --prompt x --port 0", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Has(r.out, "--prompt")) << r.out;
  r = Pagoda("generate --prompt x --metrics-port 0", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Has(r.out, "--metrics-port")) << r.out;
  // No flag is global: one given before the command is an error too.
  r = Pagoda("--model x generate --prompt x", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Has(r.out, "--model")) << r.out;
}

TEST(CliTest, BadFlagValuesNameTheFlag) {
  struct Case {
    std::string args, flag;
  };
  for (const Case& c : std::vector<Case>{
           {"generate --prompt x --max-tokens lots", "--max-tokens"},
           {"generate --prompt x --device tpu", "--device"},
           {"generate --prompt x --kv-cache maybe", "--kv-cache"},
           {"serve --drain-timeout soon", "--drain-timeout"},
           // Regression (hardening): these were accepted silently (70000 listened on 4464).
           {"serve --port 70000", "--port"},
           {"serve --metrics-port -2", "--metrics-port"},
           {"serve --max-queued-requests -1", "--max-queued-requests"},
           {"serve --num-blocks -5", "--num-blocks"},
           {"serve --threads -1", "--threads"},
           {"serve --max-seqs 0", "--max-seqs"},
           {"serve --block-size 0", "--block-size"},
           {"serve --kv-cache-dtype fp4", "--kv-cache-dtype"},
           {"serve --scheduling-policy lifo", "--scheduling-policy"},
           {"serve --preemption-mode lru", "--preemption-mode"},
           {"serve --swap-space -1", "--swap-space"},
           {"serve --cpu-isa avx10", "--cpu-isa"},
           {"generate --prompt x --cpu-isa sse", "--cpu-isa"},
           {"make-model --out /dev/null --vocab /nonexistent.gguf", "--vocab"},
           {"make-model --out /dev/null --dtype Q9_9", "--dtype"},
           {"make-model --out /dev/null --preset nope", "--preset"},
           {"make-model --preset tiny", "--out"},
       }) {
    const Result r = Pagoda(c.args, true);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out;
    EXPECT_TRUE(Has(r.out, c.flag)) << c.args << "\n" << r.out;
  }
}

TEST(CliTest, MakeModelDtypeChoosesTheWeightType) {
  const std::string dir = testing::MakeTempDir();
  ASSERT_EQ(Pagoda(absl::StrCat("make-model --out ", dir, "/f32.gguf")).exit_code, 0);
  ASSERT_EQ(Pagoda(absl::StrCat("make-model --out ", dir, "/f32b.gguf --dtype f32")).exit_code, 0);
  ASSERT_EQ(Pagoda(absl::StrCat("make-model --out ", dir, "/bf16.gguf --dtype BF16")).exit_code, 0);
  const std::string f32 = testing::ReadFileOrDie(dir + "/f32.gguf");
  EXPECT_EQ(f32, testing::ReadFileOrDie(dir + "/f32b.gguf"));  // F32 is the default
  // bf16 weights take half the bytes of f32 ones: the file is well over a third smaller.
  EXPECT_LT(testing::ReadFileOrDie(dir + "/bf16.gguf").size() * 3, f32.size() * 2);
  const Result r = Pagoda(absl::StrCat("generate --model ", dir, "/bf16.gguf --prompt hi ",
                                       "--max-tokens 4 --temperature 0 --ignore-eos --json"));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out).at("output_token_ids").size(), 4u);
}

TEST(CliTest, MakeModelWritesQuantizedTypesThatGenerate) {
  const std::string dir = testing::MakeTempDir();
  // K types need rows of 256: the `small` preset has them (tiny's 64 would stay F32).
  for (const char* preset : {"tiny", "small"}) {
    const std::string f32 = absl::StrCat(dir, "/", preset, ".gguf");
    ASSERT_EQ(Pagoda(absl::StrCat("make-model --preset ", preset, " --out ", f32)).exit_code, 0);
    const size_t f32_size = testing::ReadFileOrDie(f32).size();
    for (const char* type : {"Q4_0", "q8_0", "Q4_K", "Q6_K"}) {
      if (std::string(preset) == "tiny" && absl::EndsWith(type, "_K")) continue;
      const std::string path = absl::StrCat(dir, "/", preset, "-", type, ".gguf");
      ASSERT_EQ(
          Pagoda(absl::StrCat("make-model --preset ", preset, " --out ", path, " --dtype ", type))
              .exit_code,
          0);
      // 4.5 to 8.5 bits per weight against 32: the file is well under half the f32 one.
      EXPECT_LT(testing::ReadFileOrDie(path).size() * 2, f32_size) << preset << " " << type;
      const Result r = Pagoda(absl::StrCat("generate --model ", path, " --prompt hi ",
                                           "--max-tokens 3 --temperature 0 --ignore-eos --json"));
      ASSERT_EQ(r.exit_code, 0) << type;
      EXPECT_EQ(nlohmann::json::parse(r.out).at("output_token_ids").size(), 3u) << type;
    }
  }
}

// stories260K spells BOS "<s>" (id 1, a control token): parsed, it is one token; as plain
// text it is several.
TEST(CliTest, ParseSpecialDecidesWhetherPromptTextBecomesSpecialTokens) {
  auto prompt_ids = [](const std::string& flag) {
    const Result r = Pagoda(absl::StrCat("generate --model ", Stories(),
                                         " --prompt '<s>Once' --max-tokens 1 --temperature 0 ",
                                         "--json ", flag));
    EXPECT_EQ(r.exit_code, 0) << flag;
    return nlohmann::json::parse(r.out).at("prompt_token_ids").get<std::vector<int>>();
  };
  const std::vector<int> parsed = prompt_ids("");
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed[0], 1);  // BOS added
  EXPECT_EQ(parsed[1], 1);  // "<s>" parsed
  EXPECT_EQ(prompt_ids("--parse-special true"), parsed);
  const std::vector<int> plain = prompt_ids("--parse-special false");
  EXPECT_EQ(plain[0], 1);
  EXPECT_NE(plain[1], 1);
  EXPECT_GT(plain.size(), parsed.size());
}

}  // namespace
}  // namespace pagoda
