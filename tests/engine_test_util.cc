#include "tests/engine_test_util.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/make_model.h"
#include "tests/test_util.h"

namespace pagoda::testing {
namespace {

std::unique_ptr<engine::Engine> Start(std::unique_ptr<gguf::GgufFile> file,
                                      engine::EngineConfig config) {
  auto backend = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 2});
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return nullptr;
  auto engine = engine::Engine::Create(config, std::move(file), *std::move(backend));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return nullptr;
  (*engine)->Start();
  return *std::move(engine);
}

}  // namespace

std::unique_ptr<engine::Engine> StoriesEngine(engine::EngineConfig config) {
  return ModelEngine("stories260K.gguf", config);
}

std::unique_ptr<engine::Engine> ModelEngine(const std::string& file_name,
                                            engine::EngineConfig config) {
  auto file = gguf::GgufFile::Open(ModelPath(file_name));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  return Start(*std::move(file), config);
}

std::unique_ptr<engine::Engine> StoriesEngineWithKeys(
    const std::vector<std::pair<std::string, int32_t>>& keys, engine::EngineConfig config) {
  auto file = gguf::GgufFile::Open(ModelPath("stories260K.gguf"));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  gguf::GgufWriter writer((*file)->version(), (*file)->alignment());
  for (const auto& entry : (*file)->metadata()) {
    const auto& key = entry.first;  // named, not bound: clang 14 cannot capture a binding
    const bool replaced =
        std::any_of(keys.begin(), keys.end(), [&key](const auto& kv) { return kv.first == key; });
    if (!replaced) writer.AddValue(key, entry.second);
  }
  for (const auto& [key, value] : keys) writer.AddInt32(key, value);
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    writer.AddTensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  auto copy = gguf::GgufFile::FromBytes(writer.Serialize());
  EXPECT_TRUE(copy.ok()) << copy.status();
  if (!copy.ok()) return nullptr;
  return Start(*std::move(copy), config);
}

std::unique_ptr<engine::Engine> PresetEngine(const std::string& preset,
                                             engine::EngineConfig config) {
  auto p = model::FindPreset(preset);
  EXPECT_TRUE(p.ok()) << p.status();
  auto writer = model::MakeModel(*p, 0, gguf::TensorType::kF32);
  EXPECT_TRUE(writer.ok()) << writer.status();
  auto file = gguf::GgufFile::FromBytes(writer->Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  return Start(*std::move(file), config);
}

engine::GenerationRequest GreedyRequest(std::vector<int32_t> prompt, int32_t max_tokens,
                                        bool ignore_eos) {
  engine::GenerationRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = ignore_eos;
  return r;
}

std::vector<engine::CollectedOutput> RunAll(engine::Engine& engine,
                                            std::vector<engine::GenerationRequest> requests) {
  std::vector<std::shared_ptr<engine::CollectingSink>> sinks;
  engine.Pause();
  for (auto& r : requests) {
    sinks.push_back(std::make_shared<engine::CollectingSink>());
    auto submitted = engine.Submit(std::move(r), sinks.back());
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok())
      sinks.back()->OnOutput(
          {.finish_reason = engine::FinishReason::kError, .error = submitted.status()});
  }
  engine.Resume();
  std::vector<engine::CollectedOutput> outputs;
  for (auto& s : sinks) outputs.push_back(s->Wait());
  return outputs;
}

engine::CollectedOutput RunOne(engine::Engine& engine, engine::GenerationRequest request) {
  std::vector<engine::GenerationRequest> one;
  one.push_back(std::move(request));
  return RunAll(engine, std::move(one))[0];
}

bool WaitForIdle(engine::Engine& engine) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    const engine::EngineStats s = engine.Stats();
    if (s.num_running == 0 && s.num_waiting == 0 && s.num_free_blocks == s.num_blocks) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return false;
}

std::unique_ptr<gguf::GgufFile> QwenVocabModel(const std::string& chat_template) {
  auto vocab = gguf::GgufFile::Open(ModelsDir() + "/vocab/ggml-vocab-qwen2.gguf");
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  if (!vocab.ok()) return nullptr;
  absl::StatusOr<std::vector<std::string>> tokens =
      (*vocab)->GetStringArray("tokenizer.ggml.tokens");
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  if (!tokens.ok()) return nullptr;
  model::ModelPreset preset = *model::FindPreset("tiny");
  preset.vocab_size = static_cast<int32_t>(tokens->size());
  preset.tied_embeddings = true;
  auto made = model::MakeModel(preset, 0, gguf::TensorType::kF32);
  EXPECT_TRUE(made.ok()) << made.status();
  auto base = gguf::GgufFile::FromBytes(made->Serialize());
  EXPECT_TRUE(base.ok()) << base.status();
  gguf::GgufWriter w;
  for (const auto& [key, value] : (*base)->metadata()) {
    if (absl::StartsWith(key, "tokenizer.")) continue;
    if (key == "general.architecture") {
      w.AddString(key, "qwen2");
    } else if (absl::StartsWith(key, "llama.")) {
      w.AddValue("qwen2." + key.substr(6), value);
    } else {
      w.AddValue(key, value);
    }
  }
  for (const auto& [key, value] : (*vocab)->metadata()) {
    // The vocabulary file carries a template of its own: ours (or none) replaces it.
    if (absl::StartsWith(key, "tokenizer.") && key != "tokenizer.chat_template") {
      w.AddValue(key, value);
    }
  }
  if (!chat_template.empty()) w.AddString("tokenizer.chat_template", chat_template);
  for (const gguf::TensorInfo& t : (*base)->tensors()) {
    w.AddTensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  std::vector<float> bias(tokens->size(), 0.f);
  bias[kQwenImEnd] = 100.f;
  std::vector<uint8_t> bytes(bias.size() * sizeof(float));
  std::memcpy(bytes.data(), bias.data(), bytes.size());
  w.AddTensor("output.bias", {bias.size()}, gguf::TensorType::kF32, std::move(bytes));
  auto file = gguf::GgufFile::FromBytes(w.Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *std::move(file) : nullptr;
}

std::unique_ptr<engine::Engine> QwenVocabEngine(const std::string& chat_template,
                                                engine::EngineConfig config) {
  std::unique_ptr<gguf::GgufFile> file = QwenVocabModel(chat_template);
  if (file == nullptr) return nullptr;
  return Start(std::move(file), std::move(config));
}

}  // namespace pagoda::testing
