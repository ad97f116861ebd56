// Loading models: presets, malformed model files (missing or mis-shaped tensors, an
// unsupported architecture, inconsistent metadata), and bit-flipped real models through
// the whole engine, which must either work or fail with a status, never crash.
#include <random>
#include <string>
#include <vector>

#include "engine/collecting_sink.h"
#include "engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "model/gguf_writer.h"
#include "model/llama_model.h"
#include "model/make_model.h"
#include "model/tokenizer.h"
#include "tests/test_util.h"

namespace pagoda::model {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<kernels::Backend> Cpu() {
  return *kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 1});
}

// The tiny preset rebuilt with `edit` applied to its metadata and tensors.
std::vector<uint8_t> EditedTiny(
    const std::function<bool(const std::string& name, gguf::Value* value)>& edit_meta,
    const std::function<bool(gguf::TensorInfo* tensor)>& edit_tensor) {
  auto file = gguf::GgufFile::FromBytes(
      MakeModel(*FindPreset("tiny"), 0, gguf::TensorType::kF32)->Serialize());
  gguf::GgufWriter w;
  for (auto [key, value] : (*file)->metadata()) {
    if (edit_meta(key, &value)) w.AddValue(key, value);
  }
  for (gguf::TensorInfo t : (*file)->tensors()) {
    std::vector<uint8_t> data(t.data, t.data + t.nbytes);
    if (edit_tensor(&t)) w.AddTensor(t.name, t.dims, t.type, std::move(data));
  }
  return w.Serialize();
}

absl::Status LoadStatus(std::vector<uint8_t> bytes) {
  auto file = gguf::GgufFile::FromBytes(std::move(bytes));
  if (!file.ok()) return file.status();
  auto backend = Cpu();
  auto model = LlamaModel::Load(**file, backend.get());
  if (!model.ok()) return model.status();
  return Tokenizer::FromGguf(**file).status();
}

auto keep_meta = [](const std::string&, gguf::Value*) { return true; };
auto keep_tensor = [](gguf::TensorInfo*) { return true; };

TEST(ModelLoadTest, EveryPresetConfigMatches) {
  for (const std::string name : {"tiny", "small"}) {
    const ModelPreset p = *FindPreset(name);
    auto file = gguf::GgufFile::FromBytes(MakeModel(p, 3, gguf::TensorType::kF16)->Serialize());
    ASSERT_TRUE(file.ok()) << file.status();
    auto backend = Cpu();
    auto model = LlamaModel::Load(**file, backend.get());
    ASSERT_TRUE(model.ok()) << model.status();
    const LlamaConfig& c = (*model)->config();
    EXPECT_EQ(c.vocab_size, p.vocab_size);
    EXPECT_EQ(c.dim, p.dim);
    EXPECT_EQ(c.num_layers, p.num_layers);
    EXPECT_EQ(c.num_heads, p.num_heads);
    EXPECT_EQ(c.num_kv_heads, p.num_kv_heads);
    EXPECT_EQ(c.ffn_dim, p.ffn_dim);
    EXPECT_EQ(c.tied_embeddings, p.tied_embeddings);
    EXPECT_EQ((*Tokenizer::FromGguf(**file))->vocab_size(), p.vocab_size);
  }
  EXPECT_THAT(std::string(FindPreset("huge").status().message()), HasSubstr("tiny, small"));
}

TEST(ModelLoadTest, MakeModelIsDeterministic) {
  const ModelPreset p = *FindPreset("tiny");
  EXPECT_EQ(MakeModel(p, 7, gguf::TensorType::kF32)->Serialize(),
            MakeModel(p, 7, gguf::TensorType::kF32)->Serialize());
  EXPECT_NE(MakeModel(p, 7, gguf::TensorType::kF32)->Serialize(),
            MakeModel(p, 8, gguf::TensorType::kF32)->Serialize());
}

// A preset with a real tokenizer (make-model --vocab): llama.cpp's Llama 3 vocabulary, whose
// size sets the embedding and output rows.
TEST(ModelLoadTest, MakeModelTakesARealVocabulary) {
  auto vocab =
      gguf::GgufFile::Open(pagoda::testing::ModelsDir() + "/vocab/ggml-vocab-llama-bpe.gguf");
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto writer = MakeModel(*FindPreset("tiny"), 3, gguf::TensorType::kF16, vocab->get());
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto file = gguf::GgufFile::FromBytes(writer->Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  auto backend = Cpu();
  auto model = LlamaModel::Load(**file, backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().vocab_size, 128256);
  auto made = Tokenizer::FromGguf(**file);
  auto real = Tokenizer::FromGguf(**vocab);
  ASSERT_TRUE(made.ok() && real.ok());
  const std::string text = "Hello world, it's 2026!";
  EXPECT_EQ((*made)->Encode(text, true), (*real)->Encode(text, true));
  EXPECT_EQ((*made)->Encode(text, true).front(), 128000);  // <|begin_of_text|>

  gguf::GgufWriter no_tokens;
  no_tokens.AddString("general.architecture", "llama");
  auto empty = gguf::GgufFile::FromBytes(no_tokens.Serialize());
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(MakeModel(*FindPreset("tiny"), 3, gguf::TensorType::kF32, empty->get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelLoadTest, MissingTensor) {
  const absl::Status s = LoadStatus(
      EditedTiny(keep_meta, [](gguf::TensorInfo* t) { return t->name != "blk.1.ffn_up.weight"; }));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("blk.1.ffn_up.weight missing"));
}

TEST(ModelLoadTest, MisShapedTensor) {
  const absl::Status s = LoadStatus(EditedTiny(keep_meta, [](gguf::TensorInfo* t) {
    if (t->name == "blk.0.attn_k.weight") std::swap(t->dims[0], t->dims[1]);
    return true;
  }));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("blk.0.attn_k.weight has the wrong shape"));
}

TEST(ModelLoadTest, UnsupportedArchitecture) {
  const absl::Status s = LoadStatus(EditedTiny(
      [](const std::string& key, gguf::Value* v) {
        if (key == "general.architecture") v->s = "mamba";
        return true;
      },
      keep_tensor));
  EXPECT_THAT(std::string(s.message()), HasSubstr("unsupported architecture 'mamba'"));
}

TEST(ModelLoadTest, InconsistentMetadata) {
  struct Case {
    std::string key;
    uint64_t value;
    std::string message;
  };
  for (const Case& c :
       std::vector<Case>{{"llama.attention.head_count", 0, "head_count = 0 out of range"},
                         {"llama.attention.head_count", 3, "not divisible"},
                         {"llama.attention.head_count_kv", 3, "not a multiple"},
                         {"llama.embedding_length", 72, "token_embd.weight has the wrong shape"},
                         {"llama.block_count", 1u << 20, "block_count = 1048576 out of range"},
                         {"llama.rope.dimension_count", 64, "rope.dimension_count"}}) {
    const absl::Status s = LoadStatus(EditedTiny(
        [&](const std::string& key, gguf::Value* v) {
          if (key == c.key) v->u = c.value;
          return true;
        },
        keep_tensor));
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.key;
  }
  const absl::Status missing = LoadStatus(
      EditedTiny([](const std::string& key, gguf::Value*) { return key != "llama.block_count"; },
                 keep_tensor));
  EXPECT_THAT(std::string(missing.message()), HasSubstr("llama.block_count"));
}

// Random bit flips of stories260K through the whole engine: load, then generate a few
// tokens. Each trial either works or returns an error status; none may crash.
TEST(ModelLoadTest, BitFlippedStoriesNeverCrashTheEngine) {
  const std::string original = testing::ReadFileOrDie(testing::ModelPath("stories260K.gguf"));
  std::mt19937_64 rng(42);
  int loaded = 0, generated = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::vector<uint8_t> bytes(original.begin(), original.end());
    // Most flips go to the header, where they change structure rather than weights.
    const size_t region = trial % 3 == 0 ? bytes.size() : 14176;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      bytes[rng() % region] ^= static_cast<uint8_t>(1u << (rng() % 8));
    auto file = gguf::GgufFile::FromBytes(std::move(bytes));
    if (!file.ok()) continue;
    auto engine = engine::Engine::Create({.num_blocks = 64}, *std::move(file), Cpu());
    if (!engine.ok()) continue;
    ++loaded;
    (*engine)->Start();
    engine::GenerationRequest r;
    r.prompt = "Once upon a time";
    r.max_tokens = 4;
    auto sink = std::make_shared<engine::CollectingSink>();
    if ((*engine)->Submit(r, sink).ok()) {
      const engine::CollectedOutput out = sink->Wait();
      if (out.error.ok()) ++generated;
    }
  }
  EXPECT_GT(loaded, 10);  // flips in weights or harmless metadata still load
  EXPECT_GT(generated, 10);
}

}  // namespace
}  // namespace pagoda::model
