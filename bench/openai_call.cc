#include "bench/openai_call.h"

#include <charconv>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace pagoda::bench {
namespace {

constexpr int kDefaultReadTimeoutS = 600;

httplib::Headers AuthHeaders(const std::string& api_key) {
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  return headers;
}

// The message of an OpenAI error body, or the body itself when it is not one.
std::string ErrorMessage(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error")) {
    const nlohmann::json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      return e["message"].get<std::string>();
    }
    if (e.is_string()) return e.get<std::string>();
  }
  return body.substr(0, 512);
}

int IntOr(const nlohmann::json& j, const char* key, int fallback) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) return fallback;
  return j[key].get<int>();
}

// Runs one streamed completion to its end; blocking.
void RunCall(const OpenAiServer& server, const CallOptions& options,
             const v1::GenerateRequest& request, RequestRecord* record) {
  httplib::Client client(server.host, server.port);
  client.set_connection_timeout(10);
  const double timeout = options.request_timeout_s > 0 ? options.request_timeout_s
                                                       : static_cast<double>(kDefaultReadTimeoutS);
  client.set_read_timeout(std::chrono::microseconds(static_cast<int64_t>(timeout * 1e6)));

  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = AuthHeaders(options.api_key);
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.body = CompletionBody(request, server.model).dump();
  int status = 0;
  std::string error_body;
  SseParser parser;
  bool saw_done = false;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (status != 200) {
      if (error_body.size() < 4096) error_body.append(data, len);
      return true;
    }
    parser.Feed(std::string_view(data, len), [&](const std::string& payload) {
      if (payload == "[DONE]") {
        saw_done = true;
        return;
      }
      nlohmann::json chunk = nlohmann::json::parse(payload, nullptr, false);
      if (chunk.is_discarded()) {
        record->status = "BAD_RESPONSE";
        record->error = "an event's data is not JSON: " + payload.substr(0, 200);
        return;
      }
      ApplyCompletionChunk(chunk, NowSeconds(), record);
    });
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(req, response, error);
  record->end_time = NowSeconds();
  if (!sent) {
    record->status = error == httplib::Error::Read ? "DEADLINE_EXCEEDED" : "UNAVAILABLE";
    record->error = httplib::to_string(error);
  } else if (status != 200) {
    record->status = absl::StrCat("HTTP_", status);
    record->error = ErrorMessage(error_body);
  } else if (record->status == "OK" && !saw_done && record->finish_reason.empty()) {
    record->status = "BAD_RESPONSE";
    record->error = "the stream ended without a finish reason or [DONE]";
  }
  if (record->completion_tokens == 0) {  // a server that sends no usage: count the chunks
    for (int n : record->chunk_tokens) record->completion_tokens += n;
  }
}

}  // namespace

absl::StatusOr<OpenAiServer> ParseOpenAiServer(std::string_view address) {
  std::string_view rest = address;
  if (rest.substr(0, 7) == "http://") rest.remove_prefix(7);
  if (rest.substr(0, 8) == "https://") {
    return absl::InvalidArgumentError("--server: https is not supported by --backend openai");
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || rest.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server ", std::string(address), " must be host:port or http://host:port"));
  }
  OpenAiServer server;
  server.host = std::string(rest.substr(0, colon));
  const std::string_view port = rest.substr(colon + 1);
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), server.port);
  if (ec != std::errc() || end != port.data() + port.size() || server.port < 1 ||
      server.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server ", std::string(address), ": bad port"));
  }
  return server;
}

absl::StatusOr<v1::ModelInfo> FetchOpenAiModels(const OpenAiServer& server,
                                                const std::string& api_key) {
  httplib::Client client(server.host, server.port);
  client.set_connection_timeout(5);
  client.set_read_timeout(30);
  const std::string where =
      absl::StrCat("GET http://", server.host, ":", server.port, "/v1/models");
  httplib::Result result = client.Get("/v1/models", AuthHeaders(api_key));
  for (int attempt = 1; attempt < 4 && (!result || result->status == 503); ++attempt) {
    std::this_thread::sleep_for(std::chrono::seconds(1));  // a server still starting
    result = client.Get("/v1/models", AuthHeaders(api_key));
  }
  if (!result) {
    return absl::UnavailableError(absl::StrCat(where, " failed: ", to_string(result.error())));
  }
  if (result->status != 200) {
    return absl::UnavailableError(
        absl::StrCat(where, " answered ", result->status, ": ", ErrorMessage(result->body)));
  }
  nlohmann::json j = nlohmann::json::parse(result->body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].is_object()) {
    return absl::UnavailableError(absl::StrCat(where, " did not list a model"));
  }
  const nlohmann::json& first = j["data"][0];
  v1::ModelInfo info;
  if (first.contains("id") && first["id"].is_string()) info.set_model(first["id"]);
  const nlohmann::json meta = first.contains("meta") ? first["meta"] : nlohmann::json();
  info.set_vocab_size(IntOr(meta, "n_vocab", 0));
  info.set_context_length(IntOr(meta, "n_ctx", 0));
  info.set_backend("openai-http");
  return info;
}

nlohmann::json CompletionBody(const v1::GenerateRequest& request, const std::string& model) {
  nlohmann::json body = nlohmann::json::object();
  if (!model.empty()) body["model"] = model;
  if (request.prompt_token_ids_size() > 0) {
    body["prompt"] =
        std::vector<int32_t>(request.prompt_token_ids().begin(), request.prompt_token_ids().end());
  } else {
    body["prompt"] = request.prompt();
  }
  if (request.has_max_tokens()) body["max_tokens"] = request.max_tokens();
  body["temperature"] = request.temperature();
  if (request.ignore_eos()) body["ignore_eos"] = true;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  return body;
}

void SseParser::Feed(std::string_view bytes,
                     const std::function<void(const std::string&)>& on_data) {
  for (char c : bytes) {
    if (c != '\n') {
      line_.push_back(c);
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {  // a blank line ends the event
      if (has_data_) on_data(data_);
      data_.clear();
      has_data_ = false;
    } else if (line_.rfind("data:", 0) == 0) {
      std::string_view value = std::string_view(line_).substr(5);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (has_data_) data_.push_back('\n');
      data_.append(value);
      has_data_ = true;
    }
    line_.clear();
  }
}

void ApplyCompletionChunk(const nlohmann::json& chunk, double now, RequestRecord* record) {
  if (!chunk.is_object()) return;
  if (chunk.contains("error")) {
    record->status = "STREAM_ERROR";
    record->error = ErrorMessage(chunk.dump());
    return;
  }
  if (chunk.contains("choices") && chunk["choices"].is_array() && !chunk["choices"].empty()) {
    const nlohmann::json& choice = chunk["choices"][0];
    const bool has_text = choice.contains("text") && choice["text"].is_string() &&
                          !choice["text"].get<std::string>().empty();
    const bool finished = choice.contains("finish_reason") && choice["finish_reason"].is_string();
    if (has_text || !finished) {
      record->chunk_times.push_back(now);
      record->chunk_tokens.push_back(1);
    }
    if (finished) record->finish_reason = choice["finish_reason"].get<std::string>();
  }
  if (chunk.contains("usage") && chunk["usage"].is_object()) {
    const int prompt = IntOr(chunk["usage"], "prompt_tokens", 0);
    const int completion = IntOr(chunk["usage"], "completion_tokens", 0);
    if (prompt > 0) record->prompt_tokens = prompt;
    if (completion > 0) record->completion_tokens = completion;
  }
}

void StartOpenAiCall(const OpenAiServer& server, const CallOptions& options,
                     const v1::GenerateRequest& request, RequestRecord* record,
                     std::function<void()> done) {
  std::thread([server, options, request, record, done = std::move(done)] {
    RunCall(server, options, request, record);
    done();
  }).detach();
}

}  // namespace pagoda::bench
