// What a front end needs from the engine to run one request: submit it with a sink for
// its outputs, and abort it. Engine implements it; tests of the server's stream state
// machine use a fake (tests/generate_stream_test.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/request.h"

namespace pagoda::engine {

using RequestHandle = uint64_t;

struct SubmitResult {
  RequestHandle handle = 0;
  std::string request_id;
  int32_t prompt_tokens = 0;
};

class EngineClient {
 public:
  virtual ~EngineClient() = default;
  // Validates and queues `request`; `sink` then receives its outputs (on the engine
  // thread), the last one finished(). An error status means the sink is never called.
  virtual absl::StatusOr<SubmitResult> Submit(GenerationRequest request,
                                              std::shared_ptr<OutputSink> sink) = 0;
  // Stops request `handle` soon; its sink gets a last output (kAbort unless it finished
  // first). Unknown or finished handles are ignored. Never blocks on a step.
  virtual void Abort(RequestHandle handle) = 0;
};

}  // namespace pagoda::engine
