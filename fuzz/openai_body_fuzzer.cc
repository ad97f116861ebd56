// Fuzzes the OpenAI door's body parsers and the reasoning split: bytes taken as an HTTP body
// (the door's JSON limits first, then parsed) and converted as a completions, chat and
// Responses request: each either converts or is refused with InvalidArgument, never
// anything else (a throw, a crash, another code); a Responses request that converts has a
// conversation. The same bytes taken as a model's output are split into reasoning and
// content by each parser, and the streamed split, cut anywhere, equals the whole one.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "chat/reasoning.h"
#include "fuzz/fuzz_data.h"
#include "server/http/generation_prep.h"
#include "server/http/openai_request.h"
#include "server/http/responses_request.h"

namespace {

using pagoda::fuzz::Check;
namespace http = pagoda::server::http;
namespace chat = pagoda::chat;

void CheckConversion(const absl::StatusOr<http::OpenAiRequest>& r, const char* what) {
  Check(r.ok() || absl::IsInvalidArgument(r.status()), what);
}

void CheckSplit(std::string_view output, const chat::ReasoningFormat& format, bool open,
                size_t cut) {
  const chat::ReasoningSplit whole = chat::SplitReasoning(output, format, open);
  chat::ReasoningStreamParser parser(format, open);
  chat::ReasoningStreamParser::Delta a = parser.Feed(output.substr(0, cut));
  chat::ReasoningStreamParser::Delta b = parser.Feed(output.substr(cut));
  chat::ReasoningStreamParser::Delta c = parser.Finish();
  Check(a.reasoning + b.reasoning + c.reasoning == whole.reasoning,
        "streamed reasoning differs from the whole split");
  Check(a.content + b.content + c.content == whole.content,
        "streamed content differs from the whole split");
  Check(parser.has_reasoning() == whole.has_reasoning, "has_reasoning differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<nlohmann::json> body = http::ParseJsonBody(text);
  if (body.ok()) {
    CheckConversion(http::ParseCompletionRequest(*body, text), "completions: not InvalidArgument");
    CheckConversion(http::ParseChatCompletionRequest(*body, text), "chat: not InvalidArgument");
    absl::StatusOr<http::OpenAiRequest> responses = http::ParseResponsesRequest(*body, text);
    CheckConversion(responses, "responses: not InvalidArgument");
    if (responses.ok()) Check(!responses->request.messages.empty(), "responses: no messages");
  } else {
    Check(absl::IsInvalidArgument(body.status()), "body: not InvalidArgument");
  }
  for (const char* name : {"qwen3", "deepseek_r1", "mistral"}) {
    const chat::ReasoningFormat format = **chat::ReasoningFormatNamed(name);
    for (bool open : {false, true}) {
      CheckSplit(text, format, open, size / 2);
      CheckSplit(text, format, open, size / 3);
    }
  }
  return 0;
}
