// `pagoda make-model`: writes a Llama GGUF with deterministic random weights.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "model/make_model.h"
#include "tools/commands.h"
#include "tools/weight_type.h"

namespace pagoda::tools {
namespace {

struct MakeModelFlags {
  std::string preset = "tiny";
  std::string out;
  int64_t seed = 0;
  std::string dtype = "F32";
  std::string vocab;  // a GGUF whose tokenizer replaces the generated one
};

int RunMakeModel(const MakeModelFlags& flags) {
  auto preset = model::FindPreset(flags.preset);
  if (!preset.ok()) {
    std::cerr << "pagoda make-model: " << preset.status().message() << "\n";
    return 2;
  }
  auto dtype = ParseWeightType(flags.dtype);
  if (!dtype.ok()) {
    std::cerr << "pagoda make-model: --dtype: " << dtype.status().message() << "\n";
    return 2;
  }
  std::unique_ptr<gguf::GgufFile> vocab;
  if (!flags.vocab.empty()) {
    auto opened = gguf::GgufFile::Open(flags.vocab);
    if (!opened.ok()) {
      std::cerr << "pagoda make-model: --vocab: " << opened.status().message() << "\n";
      return 2;
    }
    vocab = *std::move(opened);
  }
  auto writer = model::MakeModel(*preset, static_cast<uint64_t>(std::max<int64_t>(0, flags.seed)),
                                 *dtype, vocab.get());
  absl::Status status = writer.ok() ? writer->WriteFile(flags.out) : writer.status();
  if (!status.ok()) {
    std::cerr << "pagoda make-model: " << status.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << flags.out << " (preset " << preset->name << ", " << preset->description
            << ")\n";
  return 0;
}

}  // namespace

Command AddMakeModelCommand(CLI::App& app) {
  auto flags = std::make_shared<MakeModelFlags>();
  CLI::App* cmd = app.add_subcommand(
      "make-model",
      "Writes a Llama GGUF with deterministic random weights and a byte-fallback tokenizer.");
  std::vector<std::string> presets, dtypes;
  for (const model::ModelPreset& p : model::ModelPresets()) presets.push_back(p.name);
  for (const auto& [name, type] : WeightTypeNames()) dtypes.push_back(name);
  cmd->add_option("--preset", flags->preset, "model preset")->check(CLI::IsMember(presets));
  cmd->add_option("--out", flags->out, "output GGUF file")->required();
  cmd->add_option("--seed", flags->seed, "weight seed (negative = 0)");
  cmd->add_option("--vocab", flags->vocab,
                  "GGUF whose tokenizer (tokenizer.* metadata) the model takes, its size the "
                  "vocabulary's: e.g. llama.cpp's models/ggml-vocab-llama-bpe.gguf (Llama 3)");
  cmd->add_option("--dtype", flags->dtype, "weight type (case-insensitive)")
      ->transform(CLI::IsMember(dtypes, CLI::ignore_case));
  return {cmd, [flags] { return RunMakeModel(*flags); }};
}

}  // namespace pagoda::tools
