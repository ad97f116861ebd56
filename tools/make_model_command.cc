// `pagoda make-model`: writes a Llama GGUF with deterministic random weights.
#include <algorithm>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "model/make_model.h"
#include "tools/commands.h"
#include "tools/sampling_flags.h"

ABSL_FLAG(std::string, preset, "tiny", "model preset: tiny, small, 25m, 100m or 1b");
ABSL_FLAG(std::string, out, "", "output GGUF file");
ABSL_FLAG(std::string, dtype, "f32", "weight type: f32, f16 or bf16");

namespace pagoda::tools {

int RunMakeModel(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "pagoda make-model --preset NAME --out FILE [--seed S] [--dtype f32|f16|bf16]\n"
      "Writes a Llama GGUF with deterministic random weights and a byte-fallback tokenizer.");
  absl::ParseCommandLine(argc, argv);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::cerr << "pagoda make-model: --out is required\n";
    return 2;
  }
  auto preset = model::FindPreset(absl::GetFlag(FLAGS_preset));
  if (!preset.ok()) {
    std::cerr << "pagoda make-model: " << preset.status().message() << "\n";
    return 2;
  }
  const std::string dtype_name = absl::GetFlag(FLAGS_dtype);
  gguf::TensorType dtype;
  if (dtype_name == "f32") {
    dtype = gguf::TensorType::kF32;
  } else if (dtype_name == "f16") {
    dtype = gguf::TensorType::kF16;
  } else if (dtype_name == "bf16") {
    dtype = gguf::TensorType::kBF16;
  } else {
    std::cerr << "pagoda make-model: --dtype must be f32, f16 or bf16\n";
    return 2;
  }
  auto writer = model::MakeModel(
      *preset, static_cast<uint64_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_seed))), dtype);
  absl::Status status = writer.ok() ? writer->WriteFile(out) : writer.status();
  if (!status.ok()) {
    std::cerr << "pagoda make-model: " << status.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << out << " (preset " << preset->name << ", " << preset->description
            << ")\n";
  return 0;
}

}  // namespace pagoda::tools
