// Architectures and RoPE settings read from GGUF metadata as llama.cpp reads them: qwen2
// (NEOX order, optional biases), rope scaling none/linear/yarn with llama.cpp's derived
// YaRN factors, rope_freqs.weight, unsupported architectures and scaling types as load
// errors that name them (the engine keeps serving), and the optional bias tensors wired
// into the forward pass.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "engine/collecting_sink.h"
#include "engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "model/gguf_writer.h"
#include "model/llama_config.h"
#include "model/llama_model.h"
#include "model/make_model.h"
#include "tests/engine_test_util.h"

namespace pagoda::model {
namespace {

using ::testing::HasSubstr;

// The tiny preset (dim 64, 2 layers, 4 heads of 16, 2 KV heads, ffn 176, vocab 512) with
// its architecture set to `arch` (keys renamed), `extra_keys` added and `extra_tensors`
// (name -> f32 values, 1-D) appended.
struct Extra {
  std::string name;
  std::vector<float> values;
};
std::vector<uint8_t> TinyWith(const std::string& arch,
                              const std::function<void(gguf::GgufWriter*)>& extra_keys,
                              const std::vector<Extra>& extra_tensors = {}) {
  auto file = gguf::GgufFile::FromBytes(
      MakeModel(*FindPreset("tiny"), 0, gguf::TensorType::kF32)->Serialize());
  gguf::GgufWriter w;
  for (auto [key, value] : (*file)->metadata()) {
    if (key == "general.architecture") value.s = arch;
    if (key.rfind("llama.", 0) == 0) key = arch + key.substr(5);
    w.AddValue(key, value);
  }
  extra_keys(&w);
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    w.AddTensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  for (const Extra& e : extra_tensors) {
    std::vector<uint8_t> bytes(e.values.size() * 4);
    std::memcpy(bytes.data(), e.values.data(), bytes.size());
    w.AddTensor(e.name, {e.values.size()}, gguf::TensorType::kF32, std::move(bytes));
  }
  return w.Serialize();
}

auto no_keys = [](gguf::GgufWriter*) {};

absl::StatusOr<LlamaConfig> ConfigOf(std::vector<uint8_t> bytes) {
  auto file = gguf::GgufFile::FromBytes(std::move(bytes));
  if (!file.ok()) return file.status();
  return LlamaConfig::FromGguf(**file);
}

std::unique_ptr<kernels::Backend> Cpu() {
  return *kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 1});
}

// Logits of the last position after a prefill of `tokens` (fp32, CPU).
std::vector<float> LastLogits(std::vector<uint8_t> bytes, const std::vector<int32_t>& tokens) {
  auto file = gguf::GgufFile::FromBytes(std::move(bytes));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  auto backend = Cpu();
  auto model = LlamaModel::Load(**file, backend.get());
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  const LlamaConfig& c = (*model)->config();
  const kernels::KvCacheShape shape{.num_layers = c.num_layers,
                                    .num_blocks = 4,
                                    .block_size = 16,
                                    .num_kv_heads = c.num_kv_heads,
                                    .head_dim = c.head_dim,
                                    .dtype = kernels::DType::kF32};
  auto memory = backend->Allocate(shape.total_bytes());
  kernels::BatchInput b;
  const int32_t n = static_cast<int32_t>(tokens.size());
  for (int32_t i = 0; i < n; ++i) {
    b.token_ids.push_back(tokens[i]);
    b.positions.push_back(i);
    b.slot_mapping.push_back(i);
  }
  b.query_start_loc = {0, n};
  b.seq_lens = {n};
  b.block_tables = {0, 1, 2, 3};
  b.max_blocks_per_seq = 4;
  b.logits_indices = {n - 1};
  std::vector<float> logits(c.vocab_size);
  const absl::Status st =
      (*model)->Forward(b, kernels::PagedKvCache{memory->data(), shape}, logits.data());
  EXPECT_TRUE(st.ok()) << st;
  return logits;
}

std::vector<float> Filled(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i % 13);
  return v;
}

TEST(ArchitectureTest, LlamaUsesAdjacentPairsAndQwen2Neox) {
  auto llama = ConfigOf(TinyWith("llama", no_keys));
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(llama->arch, Architecture::kLlama);
  EXPECT_FALSE(llama->rope_neox);
  auto qwen = ConfigOf(TinyWith("qwen2", no_keys));
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_EQ(qwen->arch, Architecture::kQwen2);
  EXPECT_EQ(qwen->architecture, "qwen2");
  EXPECT_TRUE(qwen->rope_neox);
  EXPECT_EQ(qwen->num_heads, 4);
  EXPECT_EQ(qwen->num_kv_heads, 2);
}

TEST(ArchitectureTest, UnknownArchitectureIsALoadErrorAndTheEngineKeepsServing) {
  auto serving = testing::StoriesEngine();
  ASSERT_NE(serving, nullptr);
  for (const std::string arch : {"mistral3", "gemma2", "phi3", "qwen3"}) {
    auto file = gguf::GgufFile::FromBytes(TinyWith(arch, no_keys));
    ASSERT_TRUE(file.ok());
    auto engine = engine::Engine::Create({.num_blocks = 16}, *std::move(file), Cpu());
    ASSERT_FALSE(engine.ok()) << arch;
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(engine.status().message()),
                HasSubstr("model: unsupported architecture '" + arch + "'"));
  }
  const engine::CollectedOutput out =
      testing::RunOne(*serving, testing::GreedyRequest({1, 403, 407, 261, 378}, 8));
  EXPECT_TRUE(out.error.ok()) << out.error;
  EXPECT_EQ(out.token_ids.size(), 8u);
}

TEST(RopeScalingTest, DefaultsAreLlamaCppsWhenNoKeyIsPresent) {
  auto c = ConfigOf(TinyWith("llama", no_keys));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLinear);  // llama.cpp's default type
  EXPECT_EQ(c->rope_freq_scale, 1.f);
  EXPECT_EQ(c->rope_ext_factor, 0.f);
  EXPECT_EQ(c->rope_attn_factor, 1.f);
  EXPECT_EQ(c->rope_orig_context, 2048);  // the tiny preset's context_length
  EXPECT_FALSE(c->has_rope_freqs);
}

TEST(RopeScalingTest, LinearAndNone) {
  auto linear = ConfigOf(TinyWith("llama", [](gguf::GgufWriter* w) {
    w->AddString("llama.rope.scaling.type", "linear");
    w->AddFloat32("llama.rope.scaling.factor", 4.f);
  }));
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_EQ(linear->rope_scaling, RopeScaling::kLinear);
  EXPECT_EQ(linear->rope_freq_scale, 0.25f);
  EXPECT_EQ(linear->rope_ext_factor, 0.f);
  EXPECT_EQ(linear->rope_attn_factor, 1.f);
  // The pre-"rope.scaling" key, with no type: linear.
  auto old_key = ConfigOf(TinyWith(
      "llama", [](gguf::GgufWriter* w) { w->AddFloat32("llama.rope.scale_linear", 2.f); }));
  ASSERT_TRUE(old_key.ok()) << old_key.status();
  EXPECT_EQ(old_key->rope_freq_scale, 0.5f);
  // "none" never scales, whatever the factor says.
  auto none = ConfigOf(TinyWith("qwen2", [](gguf::GgufWriter* w) {
    w->AddString("qwen2.rope.scaling.type", "none");
    w->AddFloat32("qwen2.rope.scaling.factor", 4.f);
  }));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->rope_scaling, RopeScaling::kNone);
  EXPECT_EQ(none->rope_freq_scale, 1.f);
}

TEST(RopeScalingTest, YarnDerivesLlamaCppsFactors) {
  auto c = ConfigOf(TinyWith("qwen2", [](gguf::GgufWriter* w) {
    w->AddString("qwen2.rope.scaling.type", "yarn");
    w->AddFloat32("qwen2.rope.scaling.factor", 4.f);
    w->AddUint32("qwen2.rope.scaling.original_context_length", 512);
    w->AddFloat32("qwen2.rope.scaling.attn_factor", 0.5f);
    // Keys llama.cpp does not read for llama or qwen2: ignored here too.
    w->AddFloat32("qwen2.rope.scaling.yarn_beta_fast", 5.f);
    w->AddFloat32("qwen2.rope.scaling.yarn_log_multiplier", 0.1f);
  }));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(c->rope_freq_scale, 0.25f);
  EXPECT_EQ(c->rope_ext_factor, 1.f);
  EXPECT_EQ(c->rope_orig_context, 512);
  EXPECT_EQ(c->rope_beta_fast, 32.f);
  EXPECT_EQ(c->rope_beta_slow, 1.f);
  // mscale(4) = 1 + 0.1 ln 4, cancelled by 1 / (1 + 0.1 ln 4) (ggml applies it again), times
  // the attn_factor key: 0.5 up to float rounding.
  EXPECT_NEAR(c->rope_attn_factor, 0.5f, 1e-7);
}

TEST(RopeScalingTest, UnsupportedOrBadScalingIsALoadError) {
  auto longrope = ConfigOf(TinyWith(
      "llama", [](gguf::GgufWriter* w) { w->AddString("llama.rope.scaling.type", "longrope"); }));
  EXPECT_THAT(std::string(longrope.status().message()),
              HasSubstr("unsupported rope.scaling.type 'longrope'"));
  auto negative = ConfigOf(TinyWith(
      "llama", [](gguf::GgufWriter* w) { w->AddFloat32("llama.rope.scaling.factor", -2.f); }));
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("rope.scaling.factor"));
}

TEST(RopeFreqsTest, LoadedForLlamaAndChangeTheOutput) {
  const std::vector<int32_t> prompt = {1, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40};
  const std::vector<float> base = LastLogits(TinyWith("llama", no_keys), prompt);
  // head_dim 16: 8 factors. All ones changes nothing, bit for bit.
  const std::vector<float> ones = LastLogits(
      TinyWith("llama", no_keys, {{"rope_freqs.weight", std::vector<float>(8, 1.f)}}), prompt);
  EXPECT_EQ(ones, base);
  const std::vector<float> scaled =
      LastLogits(TinyWith("llama", no_keys, {{"rope_freqs.weight", Filled(8, 1.f, 2.f)}}), prompt);
  ASSERT_EQ(scaled.size(), base.size());
  EXPECT_NE(scaled, base);
  auto c = ConfigOf(TinyWith("llama", no_keys, {{"rope_freqs.weight", Filled(8, 1.f, 2.f)}}));
  EXPECT_TRUE(c->has_rope_freqs);
  // A wrong length is an error naming the tensor.
  auto file = gguf::GgufFile::FromBytes(
      TinyWith("llama", no_keys, {{"rope_freqs.weight", std::vector<float>(16, 1.f)}}));
  auto backend = Cpu();
  auto model = LlamaModel::Load(**file, backend.get());
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("rope_freqs.weight"));
}

// Each optional bias of an architecture: zero leaves the logits bit-identical, a non-zero
// one changes them; qwen2's output.bias adds to the logits exactly.
TEST(BiasTest, OptionalBiasesAreAppliedWhereTheArchitectureReadsThem) {
  const std::vector<int32_t> prompt = {1, 50, 60, 70, 80};
  struct Case {
    std::string arch, tensor;
    size_t len;
  };
  for (const Case& c : std::vector<Case>{{"qwen2", "blk.0.attn_q.bias", 64},
                                         {"qwen2", "blk.1.attn_k.bias", 32},
                                         {"qwen2", "blk.0.attn_v.bias", 32},
                                         {"llama", "blk.1.attn_q.bias", 64},
                                         {"llama", "blk.0.attn_output.bias", 64},
                                         {"llama", "blk.0.ffn_gate.bias", 176},
                                         {"llama", "blk.1.ffn_up.bias", 176},
                                         {"llama", "blk.1.ffn_down.bias", 64}}) {
    SCOPED_TRACE(c.arch + " " + c.tensor);
    const std::vector<float> base = LastLogits(TinyWith(c.arch, no_keys), prompt);
    const std::vector<float> zero =
        LastLogits(TinyWith(c.arch, no_keys, {{c.tensor, std::vector<float>(c.len, 0.f)}}), prompt);
    EXPECT_EQ(zero, base);
    const std::vector<float> biased =
        LastLogits(TinyWith(c.arch, no_keys, {{c.tensor, Filled(c.len, -0.6f, 0.1f)}}), prompt);
    ASSERT_EQ(biased.size(), base.size());
    EXPECT_NE(biased, base);
  }
  const std::vector<float> base = LastLogits(TinyWith("qwen2", no_keys), prompt);
  const std::vector<float> bias = Filled(512, -3.f, 0.5f);
  const std::vector<float> with =
      LastLogits(TinyWith("qwen2", no_keys, {{"output.bias", bias}}), prompt);
  ASSERT_EQ(with.size(), 512u);
  for (size_t i = 0; i < with.size(); ++i) EXPECT_EQ(with[i], base[i] + bias[i]) << i;
  // A mis-shaped bias names itself.
  auto file = gguf::GgufFile::FromBytes(
      TinyWith("qwen2", no_keys, {{"blk.0.attn_k.bias", std::vector<float>(64, 0.f)}}));
  auto backend = Cpu();
  auto model = LlamaModel::Load(**file, backend.get());
  EXPECT_THAT(std::string(model.status().message()),
              HasSubstr("blk.0.attn_k.bias has the wrong shape"));
}

}  // namespace
}  // namespace pagoda::model
