// Engines over real models for tests: stories260K from the shared models folder, or a
// make-model preset built in memory.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/collecting_sink.h"
#include "engine/engine.h"

namespace pagoda::gguf {
class GgufFile;
}  // namespace pagoda::gguf

namespace pagoda::testing {

// A started CPU engine (2 threads) serving stories260K.gguf.
std::unique_ptr<engine::Engine> StoriesEngine(engine::EngineConfig config = {});
// StoriesEngine over a copy of stories260K.gguf with extra (or replaced) int32 metadata
// keys, e.g. {"tokenizer.ggml.eot_token_id", 7}.
std::unique_ptr<engine::Engine> StoriesEngineWithKeys(
    const std::vector<std::pair<std::string, int32_t>>& keys, engine::EngineConfig config = {});
// A started CPU engine (2 threads) serving the test model file `file_name` (ModelPath).
std::unique_ptr<engine::Engine> ModelEngine(const std::string& file_name,
                                            engine::EngineConfig config = {});
// A started CPU engine serving make-model preset `preset` (seed 0, f32).
std::unique_ptr<engine::Engine> PresetEngine(const std::string& preset,
                                             engine::EngineConfig config = {});

// Qwen2's end-of-turn token <|im_end|>.
inline constexpr int32_t kQwenImEnd = 151645;
// The tiny preset as a qwen2 model over Qwen2's real vocabulary (tests/data vocab.tar.xz;
// 152k byte-level BPE tokens) with random weights, `chat_template` (none when empty) and
// an output bias that makes <|im_end|> the most likely token after any prompt.
std::unique_ptr<gguf::GgufFile> QwenVocabModel(const std::string& chat_template);
// A started CPU engine (2 threads) serving QwenVocabModel(chat_template).
std::unique_ptr<engine::Engine> QwenVocabEngine(const std::string& chat_template,
                                                engine::EngineConfig config = {});

// A greedy request for `prompt` token ids producing exactly `max_tokens` tokens.
engine::GenerationRequest GreedyRequest(std::vector<int32_t> prompt, int32_t max_tokens,
                                        bool ignore_eos = true);

// Submits every request at once (the engine paused meanwhile, so all of them enter its next
// step whatever the threads' timing), waits for all, returns their outputs in order. Fails
// the test on a submission error. Resumes the engine.
std::vector<engine::CollectedOutput> RunAll(engine::Engine& engine,
                                            std::vector<engine::GenerationRequest> requests);
// RunAll for one request.
engine::CollectedOutput RunOne(engine::Engine& engine, engine::GenerationRequest request);

// Polls until the engine has nothing in flight and reports every block free.
bool WaitForIdle(engine::Engine& engine);

}  // namespace pagoda::testing
