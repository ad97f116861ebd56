// pagoda-bench's OpenAI-compatible backend: one streamed `POST /v1/completions` per request,
// against pagoda's HTTP door or any OpenAI-compatible server (llama.cpp's llama-server, vLLM,
// TGI), so one run shape measures them all.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "bench/request_record.h"
#include "bench/stream_call.h"
#include "nlohmann/json.hpp"
#include "pagoda/v1/generation.pb.h"

namespace pagoda::bench {

struct OpenAiServer {
  std::string host;
  int port = 0;
  std::string model;  // the request's "model"; empty = the server's first listed model
};

// "host:port" or "http://host:port" (no path). InvalidArgument naming what is wrong.
absl::StatusOr<OpenAiServer> ParseOpenAiServer(std::string_view address);

// The model facts a dataset needs, from `GET /v1/models`: the first model's id, and its
// vocabulary size and context length where the server says them (llama.cpp's and pagoda's
// `meta.n_vocab` / `meta.n_ctx`; 0 when absent). Unavailable when the server cannot be
// reached or answers with an error.
absl::StatusOr<v1::ModelInfo> FetchOpenAiModels(const OpenAiServer& server,
                                                const std::string& api_key);

// The streamed completion request body for `request`: prompt (text or token ids),
// max_tokens, temperature, ignore_eos, stream with usage.
nlohmann::json CompletionBody(const v1::GenerateRequest& request, const std::string& model);

// Splits a server-sent event stream into the payloads of its `data:` fields, one per event
// (multi-line data joined with "\n"); comments and other fields are skipped.
class SseParser {
 public:
  // Feeds more bytes; `on_data` runs once per completed event that carried data.
  void Feed(std::string_view bytes, const std::function<void(const std::string&)>& on_data);

 private:
  std::string line_;  // the current, unterminated line
  std::string data_;  // the current event's data so far
  bool has_data_ = false;
};

// Applies one streamed completion chunk (parsed JSON) to `record`: a chunk with a choice
// that carries text, or no finish reason yet, counts as one token's arrival; usage and the
// finish reason are kept. An `error` object sets the record's status.
void ApplyCompletionChunk(const nlohmann::json& chunk, double now, RequestRecord* record);

// Starts `request` on a thread of its own and returns at once; `done` runs exactly once on
// that thread after `*record` is final. `record->send_time` must already be set.
void StartOpenAiCall(const OpenAiServer& server, const CallOptions& options,
                     const v1::GenerateRequest& request, RequestRecord* record,
                     std::function<void()> done);

}  // namespace pagoda::bench
