// Writes the hand-made GGUF seeds of fuzz/corpus/gguf_fuzzer/ with model/gguf_writer: a tiny
// file with every metadata type, nested arrays, a small llama tokenizer and one tensor per
// block family. Usage: write_gguf_seeds OUT_DIR (fuzz/make_corpus.sh runs it).
#include <cstdio>
#include <string>
#include <vector>

#include "model/gguf_writer.h"

namespace gguf = pagoda::gguf;

namespace {

// A tensor of `n` elements of `type` with every byte set to a small pattern.
void AddFilled(gguf::GgufWriter* w, const char* name, std::vector<uint64_t> dims,
               gguf::TensorType type) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  std::vector<uint8_t> data(*gguf::TensorBytes(type, n));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 37 % 61);
  w->AddTensor(name, std::move(dims), type, std::move(data));
}

bool Write(const gguf::GgufWriter& w, const std::string& path) {
  const absl::Status s = w.WriteFile(path);
  if (!s.ok()) std::fprintf(stderr, "%s: %s\n", path.c_str(), std::string(s.message()).c_str());
  return s.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  gguf::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.context_length", 64);
  w.AddFloat32("llama.rope.freq_base", 10000.f);
  w.AddBool("tokenizer.ggml.add_bos_token", true);
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddStringArray("tokenizer.ggml.tokens",
                   {"<unk>", "<s>", "</s>", "<0x0A>", "\xe2\x96\x81", "a", "b",
                    "\xe2\x96\x81"
                    "a",
                    "ab"});
  w.AddFloat32Array("tokenizer.ggml.scores", {0, 0, 0, 0, -1, -2, -3, -4, -5});
  w.AddInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 6, 1, 1, 1, 1, 1});
  gguf::Value nested{.type = gguf::ValueType::kArray, .array_type = gguf::ValueType::kArray};
  for (int i = 0; i < 2; ++i) {
    gguf::Value inner{.type = gguf::ValueType::kArray, .array_type = gguf::ValueType::kInt64};
    inner.array.push_back(gguf::Value{.type = gguf::ValueType::kInt64, .i = -i});
    nested.array.push_back(inner);
  }
  w.AddValue("test.nested", nested);
  w.AddValue("test.f64", gguf::Value{.type = gguf::ValueType::kFloat64, .f = 0.5});
  w.AddValue("test.i8", gguf::Value{.type = gguf::ValueType::kInt8, .i = -3});
  AddFilled(&w, "f32", {3, 2}, gguf::TensorType::kF32);
  AddFilled(&w, "f16", {4}, gguf::TensorType::kF16);
  AddFilled(&w, "q4_0", {32}, gguf::TensorType::kQ4_0);
  AddFilled(&w, "q8_0", {32, 2}, gguf::TensorType::kQ8_0);
  AddFilled(&w, "q4_k", {256}, gguf::TensorType::kQ4_K);
  if (!Write(w, dir + "/tiny-llama")) return 1;

  gguf::GgufWriter bpe(2, 8);  // version 2, alignment 8
  bpe.AddString("tokenizer.ggml.model", "gpt2");
  bpe.AddString("tokenizer.ggml.pre", "qwen2");
  bpe.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "\xc4\xa0", "<|endoftext|>"});
  bpe.AddStringArray("tokenizer.ggml.merges", {"a b"});
  bpe.AddUint32("tokenizer.ggml.eos_token_id", 4);
  return Write(bpe, dir + "/tiny-gpt2-v2") ? 0 : 1;
}
