// Issue 27 on the OpenAI-compatible HTTP door, as its clients use it, over raw HTTP on
// loopback against the real server: a streamed choice ends with a chunk that carries its
// finish_reason and no text (OpenAI's and llama-server's shape), the error codes clients
// check (context_length_exceeded, temperature's range, the 401 wording), /tokenize and
// /detokenize, and CORS (--cors-allow-origin). Every receive gives up after 20 s, so a server
// that never answers fails a test instead of hanging it.
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "server/tenant_registry.h"
#include "tests/engine_test_util.h"
#include "tests/raw_http.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kReceiveTimeout = absl::Seconds(20);  // a bound on a hang only

// One response read off a connection: status, headers (names lower-cased) and the body
// (de-chunked when chunked).
struct Response {
  int status = -1;
  std::multimap<std::string, std::string> headers;
  std::string body;

  bool Has(const std::string& name) const { return headers.count(name) > 0; }
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  json Json() const { return json::parse(body, nullptr, /*allow_exceptions=*/false); }
  std::string ErrorCode() const {
    const json j = Json();
    if (!j.is_object() || !j.contains("error")) return "";
    return j["error"].value("code", "");
  }
  std::string ErrorMessage() const {
    const json j = Json();
    if (!j.is_object() || !j.contains("error")) return "";
    return j["error"].value("message", "");
  }
};

std::string Dechunk(absl::string_view data) {
  std::string out;
  while (true) {
    const size_t eol = data.find("\r\n");
    if (eol == absl::string_view::npos) return out;
    size_t size = 0;
    if (!absl::SimpleHexAtoi(data.substr(0, eol), &size) || size == 0) return out;
    const absl::string_view chunk = data.substr(eol + 2, size);
    out.append(chunk.data(), chunk.size());
    data.remove_prefix(std::min(data.size(), eol + 2 + size + 2));
  }
}

Response Parse(const std::string& data) {
  Response r;
  const size_t end = data.find("\r\n\r\n");
  if (end == std::string::npos || data.size() < 12 || !data.starts_with("HTTP/1.1 ")) return r;
  if (!absl::SimpleAtoi(absl::string_view(data).substr(9, 3), &r.status)) return r;
  std::vector<std::string> lines = absl::StrSplit(data.substr(0, end), "\r\n");
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    r.headers.emplace(absl::AsciiStrToLower(lines[i].substr(0, colon)),
                      std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1))));
  }
  r.body = data.substr(end + 4);
  if (r.Header("transfer-encoding") == "chunked") r.body = Dechunk(r.body);
  return r;
}

// The JSON payloads of the SSE events of `body`, "[DONE]" as the string "[DONE]".
std::vector<json> Events(const std::string& body) {
  std::vector<json> events;
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    if (!absl::ConsumePrefix(&event, "data: ")) {
      events.push_back("not an event: " + std::string(event));
      continue;
    }
    if (event == "[DONE]") {
      events.push_back("[DONE]");
      continue;
    }
    events.push_back(json::parse(event, nullptr, /*allow_exceptions=*/false));
  }
  return events;
}

class HttpOpenAiTest : public ::testing::Test {
 protected:
  void StartServer(server::TenantTable tenants = {}, std::vector<std::string> cors = {}) {
    if (engine_ == nullptr) {
      engine::EngineConfig config;
      config.chat_template = testing::ReadFileOrDie(
          testing::ModelPath("chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
      engine_ = testing::StoriesEngine(config);
      ASSERT_NE(engine_, nullptr);
    }
    server_.reset();
    auto server = server::Server::Start({.host = "127.0.0.1",
                                         .port = 0,
                                         .metrics_port = -1,
                                         .model_name = "stories260K",
                                         .drain_timeout = absl::Seconds(5),
                                         .tenants = std::move(tenants),
                                         .http_port = 0,
                                         .cors_allow_origins = std::move(cors)},
                                        engine_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void TearDown() override {
    server_.reset();
    if (engine_) engine_->Stop();
  }

  // `method path` with "Connection: close", `headers` (CRLF-terminated) and a JSON body.
  Response Send(const std::string& method, const std::string& path, const std::string& body,
                const std::string& headers = "") {
    const int fd = testing::ConnectLoopback(server_->http_port(), kReceiveTimeout);
    if (fd < 0) return {};
    std::string request =
        absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", headers);
    if (!body.empty()) {
      absl::StrAppend(&request, "Content-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\n");
    }
    absl::StrAppend(&request, "\r\n", body);
    testing::RawRead read;
    if (testing::SendAll(fd, request)) read = testing::ReadUntilClosed(fd);
    close(fd);
    return read.closed ? Parse(read.data) : Response{};
  }
  Response Post(const std::string& path, const json& body, const std::string& headers = "") {
    return Send("POST", path, body.dump(), headers);
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
};

// The text of a completion or chat chunk's choice; "" for an empty delta.
std::string ChoiceText(const json& choice) {
  if (choice.contains("text")) return choice["text"].get<std::string>();
  const json& delta = choice["delta"];
  return delta.contains("content") ? delta["content"].get<std::string>() : "";
}

// Item 1: a stream of max_tokens 16 could be one event with all the text and
// finish_reason "length", then [DONE]; a client that stops reading text at finish_reason
// lost it. Now each choice's text events carry finish_reason null and the choice ends with
// an event with no text (completions: "text": ""; chat: "delta": {}) and its finish_reason;
// with include_usage the last event before [DONE] has "choices": [] and the usage, and
// every other "usage": null. The text is the non-streamed one.
TEST_F(HttpOpenAiTest, StreamedChoicesEndWithAnEmptyChunkCarryingTheFinishReason) {
  StartServer();
  for (const std::string path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    const bool chat = path == "/v1/chat/completions";
    json request = {{"max_tokens", 16}, {"ignore_eos", true}, {"temperature", 0}, {"n", 2}};
    if (chat) {
      request["messages"] = {{{"role", "user"}, {"content", "Once upon"}}};
    } else {
      request["prompt"] = "Once upon a time";
    }
    const Response full = Post(path, request);
    ASSERT_EQ(full.status, 200) << full.body;
    request["stream"] = true;
    request["stream_options"] = {{"include_usage", true}};
    const Response streamed = Post(path, request);
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    const std::vector<json> events = Events(streamed.body);
    ASSERT_GE(events.size(), 3u) << streamed.body;
    EXPECT_EQ(events.back(), "[DONE]");
    const json& usage = events[events.size() - 2];
    EXPECT_EQ(usage["choices"], json::array()) << usage;
    // cached_tokens differs: the stream finds the first request's prompt in the cache.
    for (const char* field : {"prompt_tokens", "completion_tokens", "total_tokens"}) {
      EXPECT_EQ(usage["usage"][field], full.Json()["usage"][field]) << field;
    }
    std::vector<std::string> texts(2);
    std::vector<int> finishes(2, 0);
    for (size_t k = 0; k + 2 < events.size(); ++k) {
      const json& e = events[k];
      ASSERT_TRUE(e.is_object()) << e;
      EXPECT_EQ(e["object"], chat ? "chat.completion.chunk" : "text_completion");
      EXPECT_TRUE(e.contains("usage") && e["usage"].is_null()) << e;
      ASSERT_EQ(e["choices"].size(), 1u) << e;
      const json& c = e["choices"][0];
      const int i = c["index"].get<int>();
      ASSERT_TRUE(i == 0 || i == 1) << e;
      EXPECT_EQ(finishes[i], 0) << "an event after choice " << i << " finished: " << e;
      if (c["finish_reason"].is_null()) {
        texts[i] += ChoiceText(c);
        continue;
      }
      ++finishes[i];
      EXPECT_EQ(c["finish_reason"], "length") << e;
      if (chat) {
        EXPECT_EQ(c["delta"], json::object()) << e;
      } else {
        EXPECT_EQ(c["text"], "") << e;
      }
    }
    EXPECT_THAT(finishes, ElementsAre(1, 1));
    const json choices = full.Json()["choices"];
    for (int i = 0; i < 2; ++i) {
      const json& choice = choices[i];
      EXPECT_EQ(texts[i], chat ? choice["message"]["content"] : choice["text"]) << i;
      EXPECT_FALSE(texts[i].empty());
    }
  }
}

// Item 2: a prompt or max_tokens past the context answered code "invalid_request"; clients
// (LangChain, LiteLLM) look for OpenAI's "context_length_exceeded".
TEST_F(HttpOpenAiTest, PastTheContextIsContextLengthExceeded) {
  StartServer();
  const int32_t context = engine_->model_info().context_length;
  const std::vector<std::pair<std::string, json>> cases = {
      {"/v1/completions", {{"prompt", std::vector<int32_t>(context, 1)}}},
      {"/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", context}}},
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", context}}},
  };
  for (const auto& [path, body] : cases) {
    SCOPED_TRACE(body.dump().substr(0, 80));
    const Response r = Post(path, body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.ErrorCode(), "context_length_exceeded") << r.body;
    EXPECT_THAT(r.ErrorMessage(), HasSubstr("context length"));
  }
  // Other refusals keep invalid_request.
  const Response other = Post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 0}});
  EXPECT_EQ(other.status, 400);
  EXPECT_EQ(other.ErrorCode(), "invalid_request") << other.body;
}

// Issue 50, finding 1: /v1/completions refused a prompt array. Now each prompt is a request
// of its own and choice i * n + j is prompt i's sample j (as OpenAI): greedy, each choice
// equals the prompt sent alone; usage sums them; streamed the same; echo per prompt; a bad
// prompt refuses the whole request, naming it, and leaves nothing running.
TEST_F(HttpOpenAiTest, PromptArraysGiveOneChoicePerPromptAndSample) {
  StartServer();
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                            "Lily saw a bird"};
  auto alone = [&](const json& prompt) {
    const Response r =
        Post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json();
  };
  std::vector<json> singles;
  int prompt_tokens = 0;
  for (const std::string& p : prompts) {
    singles.push_back(alone(p));
    prompt_tokens += singles.back()["usage"]["prompt_tokens"].get<int>();
  }
  const json body = {{"prompt", prompts}, {"max_tokens", 6}, {"temperature", 0}, {"n", 2}};
  const Response whole = Post("/v1/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json out = whole.Json();
  ASSERT_EQ(out["choices"].size(), 6u);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) {
      const json& c = out["choices"][i * 2 + j];
      EXPECT_EQ(c["index"], i * 2 + j);
      EXPECT_EQ(c["text"], singles[i]["choices"][0]["text"]) << i << " " << j;
      EXPECT_EQ(c["finish_reason"], singles[i]["choices"][0]["finish_reason"]);
    }
  }
  EXPECT_EQ(out["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(out["usage"]["completion_tokens"], 6 * 6);

  // Streamed: the same texts, each choice ending with its finish reason, then [DONE].
  json streamed_body = body;
  streamed_body["stream"] = true;
  const Response streamed = Post("/v1/completions", streamed_body);
  ASSERT_EQ(streamed.status, 200);
  std::vector<std::string> texts(6);
  std::vector<int> ends(6, 0);
  bool done = false;
  for (absl::string_view line : absl::StrSplit(streamed.body, '\n')) {
    if (!absl::ConsumePrefix(&line, "data: ")) continue;
    if (line == "[DONE]") {
      done = true;
      continue;
    }
    const json e = json::parse(line);
    for (const json& c : e["choices"]) {
      const int index = c["index"].get<int>();
      ASSERT_LT(index, 6);
      texts[index] += c["text"].get<std::string>();
      if (!c["finish_reason"].is_null()) ++ends[index];
    }
  }
  EXPECT_TRUE(done);
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(texts[k], out["choices"][k]["text"].get<std::string>()) << k;
    EXPECT_EQ(ends[k], 1) << k;
  }

  // Token-id prompts, and echo: each choice starts with its own prompt.
  const json ids = alone(std::vector<int32_t>{1, 400, 20});
  json mixed = json::array();
  mixed.push_back(prompts[0]);
  mixed.push_back(std::vector<int32_t>{1, 400, 20});
  const Response echoed =
      Post("/v1/completions",
           {{"prompt", mixed}, {"max_tokens", 6}, {"temperature", 0}, {"echo", true}});
  ASSERT_EQ(echoed.status, 200) << echoed.body;
  const json e = echoed.Json();
  ASSERT_EQ(e["choices"].size(), 2u);
  EXPECT_EQ(e["choices"][0]["text"].get<std::string>(),
            prompts[0] + singles[0]["choices"][0]["text"].get<std::string>());
  EXPECT_TRUE(absl::EndsWith(e["choices"][1]["text"].get<std::string>(),
                             ids["choices"][0]["text"].get<std::string>()));

  // A bad prompt refuses the whole request, naming which.
  json outside = json::array();
  outside.push_back(prompts[0]);
  outside.push_back(std::vector<int32_t>{1, 100000});
  const Response bad = Post("/v1/completions", {{"prompt", outside}, {"max_tokens", 6}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.ErrorMessage(), ::testing::StartsWith("prompt[1]: prompt_token_ids: "));
  json odd_prompts = json::array();
  odd_prompts.push_back(prompts[0]);
  odd_prompts.push_back(7);
  const Response odd = Post("/v1/completions", {{"prompt", odd_prompts}});
  EXPECT_EQ(odd.status, 400);
  EXPECT_EQ(odd.ErrorMessage(), "prompt[1]: must be a string or a non-empty array of token ids");
  const Response many = Post("/v1/completions", {{"prompt", std::vector<std::string>(129, "Hi")}});
  EXPECT_EQ(many.status, 400);
  EXPECT_EQ(many.ErrorMessage(), "prompt: 129 prompts; at most 128 per request");
  const absl::Time deadline = absl::Now() + absl::Seconds(30);  // a bound on a hang only
  engine::EngineStats s = engine_->Stats();
  while ((s.num_running > 0 || s.num_free_blocks != s.num_blocks) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
    s = engine_->Stats();
  }
  EXPECT_EQ(s.num_free_blocks, s.num_blocks);
}

// Issue 50, finding 4: llama.cpp's cache_prompt false and vLLM's cache_salt were ignored
// (the request reused 80 cached tokens). Now the first skips the cache and the second keeps
// a salt's blocks to requests with the same salt; a bad type is 400 naming the field.
TEST_F(HttpOpenAiTest, CachePromptAndCacheSaltAreHonoured) {
  StartServer();
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in "
      "the park with her friends.";
  auto cached = [&](json extra) {
    json body = {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    const Response r = Post("/v1/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  EXPECT_EQ(cached({}), 0);
  EXPECT_GT(cached({}), 0);
  EXPECT_EQ(cached({{"cache_prompt", false}}), 0);
  EXPECT_EQ(cached({{"cache_salt", "user-1"}}), 0);
  EXPECT_GT(cached({{"cache_salt", "user-1"}}), 0);
  EXPECT_EQ(cached({{"cache_salt", "user-2"}}), 0);
  const Response bad = Post("/v1/completions", {{"prompt", prompt}, {"cache_salt", 7}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.ErrorMessage(), "cache_salt: must be a string");
  const Response bad_flag = Post("/v1/completions", {{"prompt", prompt}, {"cache_prompt", "no"}});
  EXPECT_EQ(bad_flag.status, 400);
  EXPECT_THAT(bad_flag.ErrorMessage(), HasSubstr("cache_prompt"));
}

// Item 2: temperature outside [0, 2] was taken (gRPC allows any finite value >= 0); OpenAI
// refuses it with 400.
TEST_F(HttpOpenAiTest, TemperatureOutsideZeroToTwoIsRefused) {
  StartServer();
  for (const double t : {-0.5, 2.01, 5.0}) {
    for (const std::string path : {"/v1/completions", "/v1/chat/completions"}) {
      SCOPED_TRACE(absl::StrCat(path, " ", t));
      const Response r = Post(path, {{"prompt", "Hi"},
                                     {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                     {"max_tokens", 2},
                                     {"temperature", t}});
      EXPECT_EQ(r.status, 400) << r.body;
      EXPECT_EQ(r.ErrorCode(), "invalid_request");
      EXPECT_EQ(r.ErrorMessage(), "temperature: must be in [0, 2]");
    }
  }
  for (const double t : {0.0, 2.0}) {
    const Response r =
        Post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 2}, {"temperature", t}});
    EXPECT_EQ(r.status, 200) << t << r.body;
  }
}

// Item 2: the 401 without a key said "send the metadata 'authorization: ...'" (gRPC's
// wording); over HTTP it names the header.
TEST_F(HttpOpenAiTest, MissingKeyNamesTheAuthorizationHeader) {
  StartServer(server::SingleKeyTable("key-acme"));
  const Response missing = Post("/v1/completions", {{"prompt", "Hi"}});
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.ErrorCode(), "invalid_api_key");
  EXPECT_EQ(missing.ErrorMessage(),
            "missing API key: send the header 'Authorization: Bearer <key>'");
  const Response wrong =
      Post("/v1/completions", {{"prompt", "Hi"}}, "Authorization: Bearer nope\r\n");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(wrong.ErrorMessage(), "unknown API key");
}

// Item 3: /tokenize and /detokenize (llama-server's shapes; vLLM's field names too), the
// engine's tokenizer, with keys like the other routes.
TEST_F(HttpOpenAiTest, TokenizeAndDetokenize) {
  StartServer();
  const std::string text = "Once upon a time";
  const absl::StatusOr<std::vector<int32_t>> expected =
      engine_->Tokenize(text, std::nullopt, /*parse_special=*/true);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const Response plain = Post("/tokenize", {{"content", text}});
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(plain.Json()["tokens"], json(*expected));
  EXPECT_EQ(plain.Json()["count"], expected->size());
  EXPECT_EQ(plain.Json()["max_model_len"], engine_->model_info().context_length);
  // vLLM's names.
  const Response vllm = Post("/tokenize", {{"prompt", text}, {"add_special_tokens", true}});
  ASSERT_EQ(vllm.status, 200) << vllm.body;
  const int32_t bos = engine_->tokenizer().bos_id();
  EXPECT_EQ(vllm.Json()["tokens"][0], bos);
  const Response bare = Post("/tokenize", {{"content", text}, {"add_special", false}});
  ASSERT_EQ(bare.status, 200) << bare.body;
  ASSERT_FALSE(bare.Json()["tokens"].empty());
  EXPECT_NE(bare.Json()["tokens"][0], bos);
  const Response pieces = Post("/tokenize", {{"content", text}, {"with_pieces", true}});
  ASSERT_EQ(pieces.status, 200) << pieces.body;
  const json piece_tokens = pieces.Json()["tokens"];
  ASSERT_EQ(piece_tokens.size(), expected->size()) << pieces.body;
  for (size_t i = 0; i < expected->size(); ++i) {
    const json& t = piece_tokens[i];
    EXPECT_EQ(t["id"], (*expected)[i]);
    EXPECT_EQ(t["piece"], engine_->tokenizer().TokenBytes((*expected)[i])) << t;
  }
  const Response back = Post("/detokenize", {{"tokens", *expected}});
  ASSERT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(back.Json()["content"], text);
  // Refusals name the field.
  const Response no_text = Post("/tokenize", {{"content", 3}});
  EXPECT_EQ(no_text.status, 400);
  EXPECT_EQ(no_text.ErrorMessage(), "content: must be a string");
  const Response bad_id = Post("/detokenize", {{"tokens", {1, 1 << 30}}});
  EXPECT_EQ(bad_id.status, 400);
  EXPECT_THAT(bad_id.ErrorMessage(), ::testing::StartsWith("tokens: "));
  EXPECT_EQ(Send("GET", "/tokenize", "").status, 405);
  // With keys, as the other routes.
  StartServer(server::SingleKeyTable("key-acme"));
  EXPECT_EQ(Post("/tokenize", {{"content", text}}).status, 401);
  EXPECT_EQ(Post("/detokenize", {{"tokens", *expected}}).status, 401);
  EXPECT_EQ(Post("/tokenize", {{"content", text}}, "Authorization: Bearer key-acme\r\n").status,
            200);
}

constexpr char kPreflight[] =
    "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n"
    "Access-Control-Request-Headers: authorization, content-type, x-stainless-os\r\n";

// Item 4: browsers. Off by default: no Access-Control-* header, OPTIONS 405. With
// --cors-allow-origin, a preflight from a listed origin gets 204 with the Allow-* headers
// (its requested headers echoed), responses to it carry Access-Control-Allow-Origin (the
// origin itself, Vary: Origin), streamed ones too; another origin gets none (preflight: 403).
TEST_F(HttpOpenAiTest, CorsOnlyForAllowedOrigins) {
  StartServer();
  EXPECT_EQ(Send("OPTIONS", "/v1/chat/completions", "", kPreflight).status, 405);
  const Response off = Post("/tokenize", {{"content", "Hi"}}, "Origin: https://app.example\r\n");
  EXPECT_EQ(off.status, 200);
  EXPECT_FALSE(off.Has("access-control-allow-origin"));

  StartServer(server::SingleKeyTable("key-acme"), {"https://app.example"});
  const Response pre = Send("OPTIONS", "/v1/chat/completions", "", kPreflight);
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.Header("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(pre.Header("access-control-allow-methods"), "GET, POST, OPTIONS");
  EXPECT_EQ(pre.Header("access-control-allow-headers"),
            "authorization, content-type, x-stainless-os");
  EXPECT_EQ(pre.Header("access-control-max-age"), "600");
  EXPECT_EQ(pre.Header("vary"), "Origin");
  EXPECT_FALSE(pre.Has("content-length"));
  EXPECT_EQ(pre.body, "");

  const Response other = Send("OPTIONS", "/v1/chat/completions", "",
                              "Origin: https://evil.example\r\n"
                              "Access-Control-Request-Method: POST\r\n");
  EXPECT_EQ(other.status, 403);
  EXPECT_EQ(other.ErrorCode(), "origin_not_allowed");
  EXPECT_FALSE(other.Has("access-control-allow-origin"));

  const std::string key = "Authorization: Bearer key-acme\r\n";
  const Response allowed =
      Post("/tokenize", {{"content", "Hi"}}, "Origin: https://app.example\r\n" + key);
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(allowed.Header("access-control-allow-origin"), "https://app.example");
  // An error (no key) to an allowed origin carries it too, so the page can read the 401.
  const Response refused =
      Post("/tokenize", {{"content", "Hi"}}, "Origin: https://app.example\r\n");
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.Header("access-control-allow-origin"), "https://app.example");
  const Response stream =
      Post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 2}, {"stream", true}},
           "Origin: https://app.example\r\n" + key);
  EXPECT_EQ(stream.status, 200);
  EXPECT_EQ(stream.Header("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(Events(stream.body).back(), "[DONE]");
  const Response foreign =
      Post("/tokenize", {{"content", "Hi"}}, "Origin: https://evil.example\r\n" + key);
  EXPECT_EQ(foreign.status, 200);
  EXPECT_FALSE(foreign.Has("access-control-allow-origin"));
  const Response no_origin = Post("/tokenize", {{"content", "Hi"}}, key);
  EXPECT_FALSE(no_origin.Has("access-control-allow-origin"));

  // "*" only when the operator says so, then with keys too.
  StartServer(server::SingleKeyTable("key-acme"), {"*"});
  const Response any = Send("OPTIONS", "/v1/completions", "", kPreflight);
  EXPECT_EQ(any.status, 204);
  EXPECT_EQ(any.Header("access-control-allow-origin"), "*");
  EXPECT_FALSE(any.Has("vary"));
}

}  // namespace
}  // namespace pagoda
