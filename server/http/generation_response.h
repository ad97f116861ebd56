// One accepted generation's answer on an HTTP connection, in OpenAI's framing: the engine's
// outputs come through its GenerationLink (the link wakes the connection, OnWake takes them)
// and go out as one JSON body or as server-sent events, one per choice's delta (deltas that
// arrive while a write is in flight become one event). It ends its GenerationCall (counts,
// metrics, the access log) with the engine's last output, and cuts the request when the
// client takes too little of it (SessionOptions::max_unsent_bytes). Everything runs on the
// connection's strand.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "engine/request.h"
#include "server/generation_call.h"
#include "server/http/generation_link.h"
#include "server/http/generation_prep.h"
#include "server/http/http_context.h"
#include "server/http/openai_logprobs.h"
#include "server/http/openai_response.h"
#include "server/http/openai_tools.h"
#include "server/http/response_writer.h"
#include "server/http/responses_output.h"

namespace pagoda::server::http {

class GenerationResponse {
 public:
  // `p` was submitted (p.refused is OK) and `call` accepted it; answers through `writer`.
  GenerationResponse(HttpContext& context, ResponseWriter& writer, ApiKind kind,
                     std::shared_ptr<GenerationCall> call, PreparedGeneration p);
  GenerationResponse(const GenerationResponse&) = delete;
  GenerationResponse& operator=(const GenerationResponse&) = delete;

  // Streamed: the event stream's head (and chat's role events). Then watches the peer and
  // takes what the engine delivered already (a wake before this found nothing to do).
  // May end the response.
  void Start();
  // The link woke the connection: takes the outputs delivered since. May end the response.
  void OnWake();
  // The writer's queue drained: streamed, the text held meanwhile goes out as one event.
  void OnWritesDone();
  // The client went away: the engine request is aborted (its last output still comes).
  void OnClientGone();

  // The engine delivered its last output (the call ended).
  bool done() const { return phase_ == Phase::kDone; }
  const GenerationCall& call() const { return *call_; }

 private:
  enum class Phase {
    kRunning,     // the engine is at work and the client served
    kClientGone,  // the client went away: the engine was told, its last output is awaited
    kCut,         // over the unsent cap: the engine was told, the answer (if any) is out
    kDone,        // the engine delivered its last output
  };
  // One choice.
  struct Sample {
    // Delivered but not yet in a response: streamed, since its last event; non-streamed,
    // all of it.
    std::string held;
    engine::FinishReason reason = engine::FinishReason::kNone;  // once it ended
    bool last_event_out = false;             // streamed: its finish_reason event is out
    std::optional<ChoiceLogprobs> logprobs;  // when requested
    bool reasoning_open = false;  // its output starts inside the reasoning (the engine says)
    std::optional<chat::ReasoningStreamParser> reasoning;  // streamed, with reasoning_
  };
  // A piece of a choice's output, its reasoning split out and its answer's tool calls.
  struct Parsed {
    std::string reasoning;
    chat::ToolCallStreamDelta answer;
  };

  // Aborts every part in the engine (their blocks are freed within a step).
  void AbortAll();
  // Choice i's next `text` through its reasoning and tool-call parsers (with `at_end`,
  // everything they held back too).
  Parsed Parse(size_t i, const std::string& text, bool at_end);
  void WriteEvents(const std::vector<std::string>& events);
  // Streamed: each sample's held text as one event.
  void FlushText();
  // Streamed: sample i's held text as one event (none when tool-call parsing holds it all
  // back); with `at_end` its logprobs and held-back text are all taken.
  void WriteText(size_t i, bool at_end);
  // Streamed: the last events of each sample that ended: the text left, if any, then an
  // event with empty text (completions) or an empty delta (chat) and the finish reason.
  void WriteEndedSamples();
  // Over SessionOptions::max_unsent_bytes (held text plus the writer's unsent bytes): aborts
  // the engine request, counts it, and closes the connection (after a 429 when nothing was
  // sent yet). True when it cut.
  bool CutIfOverUnsentCap();
  // The engine's last output: ends the call and the response. Nothing touches this object
  // after the response ended (the router may drop it then).
  void Finish(const OutputBatch& batch);

  HttpContext& context_;
  ResponseWriter& writer_;
  const ApiKind kind_;
  const bool stream_;
  const bool include_usage_;
  std::shared_ptr<GenerationLink> link_;
  const std::vector<engine::RequestHandle> handles_;  // one per part (prompt)
  const std::vector<uint64_t> registrations_;         // in the context's registry of generations
  ResponseFormatter format_;
  std::vector<Sample> samples_;
  // Tool calls parsed as the output comes: streamed chat, and responses.
  std::optional<ToolCallStreams> tool_calls_;
  std::optional<chat::ReasoningFormat> reasoning_;  // chat and responses: reasoning split out
  std::optional<ResponsesOutput> responses_;        // kResponses: its items and events
  // Caller, bucket, counts, metrics and the access log (server/generation_call.h).
  std::shared_ptr<GenerationCall> call_;
  Phase phase_ = Phase::kRunning;
};

}  // namespace pagoda::server::http
