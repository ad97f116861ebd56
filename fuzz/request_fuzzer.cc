// Fuzzes request conversion and validation: bytes parsed as the server's wire request
// (internal::RawGenerateRequest), converted by server::ToEngineRequest, then submitted to a
// real engine (stories260K, CPU backend): aborted at once, or run to the end when it asks for
// at most 4 tokens. A request is either refused with InvalidArgument / ResourceExhausted or
// accepted, and an accepted one always gets a last output with every token id in the
// vocabulary; one that runs gets no error, at most max_tokens tokens, valid UTF-8 without
// its stop strings, and a logprob entry per token when asked.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/time/time.h"
#include "engine/collecting_sink.h"
#include "engine/engine.h"
#include "fuzz/fuzz_data.h"
#include "kernels/backend.h"
#include "model/tokenizer.h"
#include "model/utf8.h"
#include "pagoda/internal/raw_generate_request.pb.h"
#include "server/request_convert.h"

namespace {

using pagoda::fuzz::Check;
namespace engine = pagoda::engine;

engine::Engine* the_engine = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  auto backend = pagoda::kernels::CreateBackend(
      {.device = pagoda::kernels::DeviceKind::kCpu, .num_threads = 1});
  Check(backend.ok(), "no CPU backend");
  engine::EngineConfig config;
  config.num_blocks = 64;  // stories260K: 512 positions = 32 blocks of 16
  config.max_seqs = 4;
  config.max_queued_requests = 8;
  auto created = engine::Engine::Create(config, pagoda::fuzz::OpenOrDie("stories260K.gguf"),
                                        *std::move(backend));
  Check(created.ok(), "the stories260K engine does not start");
  the_engine = created->release();  // lives for the whole run
  the_engine->Start();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::internal::RawGenerateRequest raw;
  if (!raw.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<engine::GenerationRequest> request = pagoda::server::ToEngineRequest(raw);
  if (!request.ok()) {
    Check(absl::IsInvalidArgument(request.status()), "conversion error not InvalidArgument");
    return 0;
  }
  // Requests for at most 4 tokens run to the end (sampling, stops, detokenizing, logprobs);
  // the others are aborted at once.
  const bool run = request->max_tokens.has_value() && *request->max_tokens <= 4;
  const engine::GenerationRequest copy = *request;
  auto sink = std::make_shared<engine::CollectingSink>();
  absl::StatusOr<engine::SubmitResult> submitted = the_engine->Submit(*std::move(request), sink);
  if (!submitted.ok()) {
    Check(absl::IsInvalidArgument(submitted.status()) ||
              absl::IsResourceExhausted(submitted.status()),
          "Submit error neither InvalidArgument nor ResourceExhausted");
    return 0;
  }
  if (!run) the_engine->Abort(submitted->handle);
  engine::CollectedOutput out;
  Check(sink->WaitFor(absl::Seconds(60), &out), "an accepted request never finished");
  Check(out.finish_reason != engine::FinishReason::kNone, "last output not finished");
  const int32_t vocab = the_engine->tokenizer().vocab_size();
  for (int32_t id : out.token_ids) Check(id >= 0 && id < vocab, "output id out of range");
  Check(out.usage.prompt_tokens == submitted->prompt_tokens, "usage disagrees with Submit");
  if (!run) return 0;
  Check(out.finish_reason != engine::FinishReason::kError, "a valid request failed");
  Check(static_cast<int32_t>(out.token_ids.size()) <= *copy.max_tokens, "more than max_tokens");
  Check(pagoda::model::IsValidUtf8(out.text), "delivered text is not valid UTF-8");
  for (const std::string& stop : copy.stop) {
    Check(stop.empty() || out.text.find(stop) == std::string::npos, "a stop string delivered");
  }
  if (copy.sampling.logprobs.has_value()) {
    Check(out.logprobs.size() == out.token_ids.size(), "one logprob entry per token");
  }
  return 0;
}
