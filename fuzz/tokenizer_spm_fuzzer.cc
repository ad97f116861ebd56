// Fuzzes the llama (SentencePiece-style) tokenizer with real vocabularies from tests/data
// (Llama 2 and Phi-3): encode with and without special-token parsing, decode, detokenize
// incrementally. Byte 0 of the input picks the vocabulary and BOS; the rest is the text.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_data.h"
#include "fuzz/tokenizer_check.h"
#include "model/tokenizer.h"

namespace {

std::vector<std::unique_ptr<pagoda::model::Tokenizer>>* tokenizers = nullptr;

std::unique_ptr<pagoda::model::Tokenizer> Load(const char* name) {
  auto file = pagoda::fuzz::OpenOrDie(name);
  auto tokenizer = pagoda::model::Tokenizer::FromGguf(*file);
  pagoda::fuzz::Check(tokenizer.ok(), "a test vocabulary does not load");
  pagoda::fuzz::Check((*tokenizer)->model() == "llama", "not a llama vocabulary");
  return *std::move(tokenizer);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  tokenizers = new std::vector<std::unique_ptr<pagoda::model::Tokenizer>>();
  tokenizers->push_back(Load("vocab/ggml-vocab-llama-spm.gguf"));
  tokenizers->push_back(Load("vocab/ggml-vocab-phi-3.gguf"));
  tokenizers->push_back(Load("stories260K.gguf"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& tokenizer = *(*tokenizers)[data[0] % tokenizers->size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  pagoda::fuzz::CheckTokenizer(tokenizer, text, /*add_bos=*/(data[0] & 0x80) != 0);
  return 0;
}
