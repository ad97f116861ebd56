// Quantized stories260K files written by llama-quantize (tests/data/stories260K_quant.tar.xz)
// generate, greedily, exactly llama.cpp's tokens for the golden prompts. These files mix
// types as llama-quantize does for a model this small (F16 ffn_down, whose rows of 172 are
// not whole blocks; Q8_0 token embeddings; Q5_0 beside Q8_0 in the Q4_K_M-style file).
#include <string>
#include <tuple>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu_isa.h"
#include "model/gguf.h"
#include "nlohmann/json.hpp"
#include "tests/engine_test_util.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

std::unique_ptr<engine::Engine> StartEngine(const std::string& path) {
  auto file = gguf::GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto backend = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 2});
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return nullptr;
  // An f32 cache, as the references were made (-ctk f32 -ctv f32).
  auto engine =
      engine::Engine::Create({.kv_cache_dtype = "f32"}, *std::move(file), *std::move(backend));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return nullptr;
  (*engine)->Start();
  return *std::move(engine);
}

// Every weight type at every instruction-set level this CPU runs (kernels/cpu_isa.h): the
// kernels of each level must give llama.cpp's tokens, not only the level this CPU picks.
class QuantGoldenTest : public ::testing::TestWithParam<std::tuple<std::string, kernels::CpuIsa>> {
};

// Runs the golden cases `cases` (stories260K.golden.json's layout) on `engine`.
void ExpectGolden(engine::Engine& engine, const nlohmann::json& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE("prompt '" + c.at("prompt").get<std::string>() + "'");
    const auto want = c.at("output_token_ids").get<std::vector<int32_t>>();
    const engine::CollectedOutput out = testing::RunOne(
        engine, testing::GreedyRequest(c.at("prompt_token_ids").get<std::vector<int32_t>>(),
                                       static_cast<int32_t>(want.size()), false));
    // Where llama.cpp's own tokens depend on its attention kernel (flash attention on, the
    // reference, or off), the file records both; pagoda's f32 attention must give one.
    if (c.contains("output_token_ids_flash_attn_off")) {
      const auto fa_off = c.at("output_token_ids_flash_attn_off").get<std::vector<int32_t>>();
      EXPECT_TRUE(out.token_ids == want || out.token_ids == fa_off)
          << ::testing::PrintToString(out.token_ids);
    } else {
      EXPECT_EQ(out.token_ids, want);
      EXPECT_EQ(out.text, c.at("output_text").get<std::string>());
    }
  }
}

TEST_P(QuantGoldenTest, GreedyMatchesLlamaCpp) {
  const auto& [type, isa] = GetParam();
  kernels::ScopedCpuIsaCap cap(isa);
  if (!cap.ok()) GTEST_SKIP() << "this CPU does not run " << kernels::CpuIsaName(isa);
  const std::string base = testing::ModelPath("stories260K_quant/stories260K-" + type);
  const auto golden = nlohmann::json::parse(testing::ReadFileOrDie(base + ".golden.json"));
  auto engine = StartEngine(base + ".gguf");
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(golden.at("cases").size(), 2u);
  ExpectGolden(*engine, golden.at("cases"));
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

INSTANTIATE_TEST_SUITE_P(
    Types, QuantGoldenTest,
    ::testing::Combine(::testing::Values("Q8_0", "Q6_K", "Q5_1", "Q5_0", "Q4_K", "Q4_1", "Q4_0"),
                       ::testing::Values(kernels::CpuIsa::kPortable, kernels::CpuIsa::kAvx2,
                                         kernels::CpuIsa::kAvx512, kernels::CpuIsa::kAvx512Vnni)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" +
             std::string(kernels::CpuIsaName(std::get<1>(info.param)));
    });

}  // namespace
}  // namespace pagoda
