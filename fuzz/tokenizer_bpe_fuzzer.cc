// Fuzzes the gpt2 (byte-level BPE) tokenizer with real vocabularies from tests/data: Llama 3
// under every pre-tokenizer llama.cpp has a matcher for (tokenizer.ggml.pre rewritten, as
// tests/vocab_test.cc does) and Qwen2. Byte 0 of the input picks the tokenizer and BOS; the
// rest is the text. Valid UTF-8 must survive encode + decode unchanged.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_data.h"
#include "fuzz/tokenizer_check.h"
#include "model/gguf_writer.h"
#include "model/tokenizer.h"
#include "model/utf8.h"

namespace {

using pagoda::fuzz::Check;
namespace gguf = pagoda::gguf;

std::vector<std::unique_ptr<pagoda::model::Tokenizer>>* tokenizers = nullptr;

std::unique_ptr<pagoda::model::Tokenizer> FromFile(const gguf::GgufFile& file) {
  auto tokenizer = pagoda::model::Tokenizer::FromGguf(file);
  Check(tokenizer.ok(), "a test vocabulary does not load");
  Check((*tokenizer)->model() == "gpt2", "not a gpt2 vocabulary");
  return *std::move(tokenizer);
}

// The vocabulary `file` with tokenizer.ggml.pre set to `pre` (its tensors are not needed).
std::unique_ptr<pagoda::model::Tokenizer> WithPre(const gguf::GgufFile& file, const char* pre) {
  gguf::GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) {
    if (key != "tokenizer.ggml.pre" && key != "general.alignment") writer.AddValue(key, value);
  }
  writer.AddString("tokenizer.ggml.pre", pre);
  auto copy = gguf::GgufFile::FromBytes(writer.Serialize());
  Check(copy.ok(), "the rewritten vocabulary does not parse");
  return FromFile(**copy);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  tokenizers = new std::vector<std::unique_ptr<pagoda::model::Tokenizer>>();
  auto llama3 = pagoda::fuzz::OpenOrDie("vocab/ggml-vocab-llama-bpe.gguf");
  for (const char* pre :
       {"llama-bpe", "default", "gpt-2", "qwen2", "smollm", "deepseek-llm", "tekken"}) {
    tokenizers->push_back(WithPre(*llama3, pre));
  }
  tokenizers->push_back(FromFile(*pagoda::fuzz::OpenOrDie("vocab/ggml-vocab-qwen2.gguf")));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& tokenizer = *(*tokenizers)[(data[0] & 0x7f) % tokenizers->size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<int32_t> ids =
      pagoda::fuzz::CheckTokenizer(tokenizer, text, /*add_bos=*/(data[0] & 0x80) != 0);
  // BOS is a control token: it decodes to nothing.
  if (pagoda::model::IsValidUtf8(text)) {
    Check(tokenizer.Decode(ids, false) == text, "valid UTF-8 does not survive encode+decode");
  }
  return 0;
}
