// Issue 27 items 2 and 3 on both doors, over real HTTP (cpp-httplib) and gRPC on loopback
// with stories260K: logprobs on /v1/completions (logprobs: k) and /v1/chat/completions
// (logprobs: true, top_logprobs: k), streamed and not, field by field and equal to what gRPC
// reports for the same greedy request; a streamed event carries the logprobs of the tokens
// whose text it carries, also when a stop string holds text back. logit_bias on both doors:
// banning the greedy token gives the next most likely one, +100 forces a token, refusals
// name the field, and a biased request beside an unbiased one changes neither's tokens.
#include <httplib.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "model/tokenizer.h"
#include "nlohmann/json.hpp"
#include "pagoda/v1/generation.grpc.pb.h"
#include "server/server.h"
#include "tests/engine_test_util.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct Reply {
  int status = -1;
  std::string body;
  json Json() const { return json::parse(body, nullptr, false); }
  std::string ErrorMessage() const {
    const json j = Json();
    return j.is_object() && j.contains("error") ? j["error"].value("message", "") : "";
  }
};

// A gRPC stream, concatenated.
struct GrpcResult {
  grpc::Status status;
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<v1::TokenLogprob> logprobs;
};

// The JSON of every "data:" event of an SSE body except [DONE].
std::vector<json> Events(const std::string& body) {
  std::vector<json> out;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (!absl::ConsumePrefix(&line, "data: ") || line == "[DONE]") continue;
    out.push_back(json::parse(line, nullptr, false));
  }
  return out;
}

std::string ChoiceText(const json& choice) {
  if (choice.contains("text")) return choice["text"].get<std::string>();
  const json& delta = choice["delta"];
  return delta.contains("content") ? delta["content"].get<std::string>() : "";
}

json Bytes(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

class HttpLogprobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine::EngineConfig config;
    config.chat_template =
        testing::ReadFileOrDie(testing::ModelPath("chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
    engine_ = testing::StoriesEngine(config);
    ASSERT_NE(engine_, nullptr);
    auto server = server::Server::Start({.host = "127.0.0.1",
                                         .port = 0,
                                         .metrics_port = -1,
                                         .model_name = "stories260K",
                                         .drain_timeout = absl::Seconds(5),
                                         .http_port = 0},
                                        engine_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Generation::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                        grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    server_.reset();
    if (engine_) engine_->Stop();
  }

  Reply Post(const std::string& path, const json& body) {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(60, 0);
    httplib::Result r = c.Post(path.c_str(), body.dump(), "application/json");
    if (!r) return {};
    return {r->status, r->body};
  }

  static GrpcResult Read(grpc::ClientReader<v1::GenerateResponse>* reader) {
    GrpcResult g;
    v1::GenerateResponse r;
    while (reader->Read(&r)) {
      g.token_ids.insert(g.token_ids.end(), r.token_ids().begin(), r.token_ids().end());
      g.text += r.text();
      g.logprobs.insert(g.logprobs.end(), r.logprobs().begin(), r.logprobs().end());
    }
    g.status = reader->Finish();
    return g;
  }
  GrpcResult Generate(const v1::GenerateRequest& r) {
    grpc::ClientContext ctx;
    return Read(stub_->Generate(&ctx, r).get());
  }
  GrpcResult Chat(const v1::ChatRequest& r) {
    grpc::ClientContext ctx;
    return Read(stub_->Chat(&ctx, r).get());
  }

  std::string Piece(int32_t id) const { return engine_->tokenizer().TokenBytes(id); }

  // Completions' logprobs object against gRPC's tokens (`k` top entries requested): each
  // token's text and logprob, its top entries plus the chosen one, its offset in the text.
  void ExpectCompletionLogprobs(const json& lp, const std::vector<v1::TokenLogprob>& want,
                                size_t k) {
    ASSERT_TRUE(lp.is_object()) << lp;
    ASSERT_EQ(lp["tokens"].size(), want.size()) << lp;
    ASSERT_EQ(lp["token_logprobs"].size(), want.size());
    ASSERT_EQ(lp["top_logprobs"].size(), want.size());
    ASSERT_EQ(lp["text_offset"].size(), want.size());
    int64_t offset = 0;
    for (size_t j = 0; j < want.size(); ++j) {
      SCOPED_TRACE(j);
      const std::string piece = Piece(want[j].token_id());
      EXPECT_EQ(lp["tokens"][j], piece);
      EXPECT_EQ(lp["token_logprobs"][j].get<float>(), want[j].logprob());
      EXPECT_EQ(lp["text_offset"][j], offset);
      offset += static_cast<int64_t>(piece.size());  // ASCII text: bytes are code points
      const json& top = lp["top_logprobs"][j];
      ASSERT_EQ(want[j].top_logprobs_size(), static_cast<int>(k));
      // Most likely first; a text two ids share keeps the likelier.
      std::map<std::string, float> expected;
      for (const v1::TopLogprob& t : want[j].top_logprobs()) {
        expected.emplace(Piece(t.token_id()), t.logprob());
      }
      expected.emplace(piece, want[j].logprob());
      ASSERT_EQ(top.size(), expected.size()) << top;
      for (const auto& [text, logprob] : expected) EXPECT_EQ(top[text].get<float>(), logprob);
    }
  }

  // Chat's logprobs content against gRPC's tokens, field by field.
  void ExpectChatLogprobs(const json& lp, const std::vector<v1::TokenLogprob>& want, int k) {
    ASSERT_TRUE(lp.is_object()) << lp;
    const json& content = lp["content"];
    ASSERT_EQ(content.size(), want.size()) << lp;
    for (size_t j = 0; j < want.size(); ++j) {
      SCOPED_TRACE(j);
      const json& c = content[j];
      const std::string piece = Piece(want[j].token_id());
      EXPECT_EQ(c["token"], piece);
      EXPECT_EQ(c["logprob"].get<float>(), want[j].logprob());
      EXPECT_EQ(c["bytes"], Bytes(piece));
      ASSERT_EQ(c["top_logprobs"].size(), static_cast<size_t>(k));
      ASSERT_EQ(want[j].top_logprobs_size(), k);
      for (int t = 0; t < k; ++t) {
        const v1::TopLogprob& w = want[j].top_logprobs(t);
        const json& top = c["top_logprobs"][t];
        EXPECT_EQ(top["token"], Piece(w.token_id()));
        EXPECT_EQ(top["logprob"].get<float>(), w.logprob());
        EXPECT_EQ(top["bytes"], Bytes(Piece(w.token_id())));
      }
    }
  }

  // A streamed choice's events against its tokens: token j rides on the first event whose
  // text (with all before it) covers its text; tokens past the end of the text (a stop
  // string cut it) ride on one of the choice's last two events (its last text, its finish).
  // Returns the events' logprobs merged into one object of the non-streamed shape.
  json ExpectAligned(const std::vector<json>& events, const std::vector<int32_t>& tokens,
                     bool chat) {
    std::vector<size_t> ends;  // each token's end in the text, in bytes
    size_t end = 0;
    for (int32_t id : tokens) ends.push_back(end += Piece(id).size());
    json merged = chat ? json{{"content", json::array()}}
                       : json{{"tokens", json::array()},
                              {"token_logprobs", json::array()},
                              {"top_logprobs", json::array()},
                              {"text_offset", json::array()}};
    size_t sent = 0, next = 0;
    for (size_t k = 0; k < events.size(); ++k) {
      const json& e = events[k];
      if (e["choices"].size() != 1) continue;
      const json& c = e["choices"][0];
      sent += ChoiceText(c).size();
      size_t covered = next;
      while (covered < tokens.size() && ends[covered] <= sent) ++covered;
      const json& lp = c["logprobs"];
      const json* list = lp.is_null() ? nullptr : chat ? &lp["content"] : &lp["tokens"];
      const size_t got = list == nullptr ? 0 : list->size();
      EXPECT_TRUE(list == nullptr || got > 0) << "an empty logprobs object: " << e;
      if (k + 2 >= events.size()) {
        EXPECT_GE(got, covered - next) << e;
      } else {
        EXPECT_EQ(got, covered - next) << e;
      }
      if (list == nullptr) continue;
      for (auto& [key, value] : lp.items()) {
        for (const json& v : value) merged[key].push_back(v);
      }
      next += got;
    }
    EXPECT_EQ(next, tokens.size());
    return merged;
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

constexpr char kPrompt[] = "Once upon a time";

TEST_F(HttpLogprobsTest, CompletionLogprobsEqualGrpcStreamedAndNot) {
  v1::GenerateRequest g;
  g.set_prompt(kPrompt);
  g.set_max_tokens(12);
  g.set_temperature(0);
  g.set_ignore_eos(true);
  g.set_logprobs(3);
  const GrpcResult want = Generate(g);
  ASSERT_TRUE(want.status.ok()) << want.status.error_message();
  ASSERT_EQ(want.logprobs.size(), 12u);

  const json req = {{"prompt", kPrompt},
                    {"max_tokens", 12},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"logprobs", 3}};
  const Reply whole = Post("/v1/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json choice = whole.Json()["choices"][0];
  EXPECT_EQ(choice["text"], want.text);
  ExpectCompletionLogprobs(choice["logprobs"], want.logprobs, 3);

  json stream_req = req;
  stream_req["stream"] = true;
  const Reply streamed = Post("/v1/completions", stream_req);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const json merged = ExpectAligned(Events(streamed.body), want.token_ids, /*chat=*/false);
  EXPECT_EQ(merged, choice["logprobs"]);

  // Without logprobs, "logprobs": null as before.
  const Reply plain = Post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 2}});
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_TRUE(plain.Json()["choices"][0]["logprobs"].is_null());
  // logprobs 0: the chosen token only.
  const Reply zero =
      Post("/v1/completions",
           {{"prompt", kPrompt}, {"max_tokens", 2}, {"temperature", 0}, {"logprobs", 0}});
  ASSERT_EQ(zero.status, 200) << zero.body;
  const json top = zero.Json()["choices"][0]["logprobs"]["top_logprobs"];
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].size(), 1u);
}

TEST_F(HttpLogprobsTest, ChatLogprobsEqualGrpcStreamedAndNot) {
  v1::ChatRequest g;
  v1::ChatMessage* m = g.add_messages();
  m->set_role("user");
  m->set_content(kPrompt);
  g.mutable_params()->set_max_tokens(10);
  g.mutable_params()->set_temperature(0);
  g.mutable_params()->set_ignore_eos(true);
  g.mutable_params()->set_logprobs(2);
  const GrpcResult want = Chat(g);
  ASSERT_TRUE(want.status.ok()) << want.status.error_message();
  ASSERT_EQ(want.logprobs.size(), 10u);

  const json req = {{"messages", {{{"role", "user"}, {"content", kPrompt}}}},
                    {"max_tokens", 10},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"logprobs", true},
                    {"top_logprobs", 2}};
  const Reply whole = Post("/v1/chat/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json choice = whole.Json()["choices"][0];
  EXPECT_EQ(choice["message"]["content"], want.text);
  ExpectChatLogprobs(choice["logprobs"], want.logprobs, 2);

  json stream_req = req;
  stream_req["stream"] = true;
  const Reply streamed = Post("/v1/chat/completions", stream_req);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const std::vector<json> events = Events(streamed.body);
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events[0]["choices"][0]["logprobs"].is_null()) << events[0];  // the role chunk
  const json merged = ExpectAligned(events, want.token_ids, /*chat=*/true);
  EXPECT_EQ(merged, choice["logprobs"]);

  // logprobs without top_logprobs: no top entries; false: none.
  json no_top = req;
  no_top.erase("top_logprobs");
  const Reply bare = Post("/v1/chat/completions", no_top);
  ASSERT_EQ(bare.status, 200) << bare.body;
  EXPECT_EQ(bare.Json()["choices"][0]["logprobs"]["content"][0]["top_logprobs"], json::array());
  no_top["logprobs"] = false;
  const Reply off = Post("/v1/chat/completions", no_top);
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_TRUE(off.Json()["choices"][0]["logprobs"].is_null());
}

// Text a possible stop string holds back holds its tokens back; the tokens whose text the
// stop string removed ride on the choice's last event.
TEST_F(HttpLogprobsTest, StreamedLogprobsFollowHeldBackText) {
  engine::GenerationRequest plain = testing::GreedyRequest({}, 16);
  plain.prompt = kPrompt;
  const engine::CollectedOutput free_run = testing::RunOne(*engine_, plain);
  ASSERT_GE(free_run.text.size(), 20u);
  // A stop string from the middle of the text: the text before it is held back while it
  // could still be the stop string, and the text ends before it.
  const size_t at = free_run.text.size() / 2;
  const std::string stop = free_run.text.substr(at, 4);
  const size_t first = free_run.text.find(stop);
  for (const bool chat : {false, true}) {
    SCOPED_TRACE(chat ? "chat" : "completions");
    engine::GenerationRequest r = plain;
    r.stop = {stop};
    r.sampling.logprobs = 1;
    json req = {{"max_tokens", 16},
                {"temperature", 0},
                {"ignore_eos", true},
                {"stop", stop},
                {"stream", true}};
    if (chat) {
      r.prompt.clear();
      r.messages = {{.role = "user", .content = kPrompt}};
      req["messages"] = {{{"role", "user"}, {"content", kPrompt}}};
      req["logprobs"] = true;
      req["top_logprobs"] = 1;
    } else {
      req["prompt"] = kPrompt;
      req["logprobs"] = 1;
    }
    const engine::CollectedOutput want = testing::RunOne(*engine_, r);
    if (!chat) {
      EXPECT_EQ(want.text, free_run.text.substr(0, first));
    }
    const Reply streamed = Post(chat ? "/v1/chat/completions" : "/v1/completions", req);
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    const std::vector<json> events = Events(streamed.body);
    std::string text;
    for (const json& e : events) text += ChoiceText(e["choices"][0]);
    EXPECT_EQ(text, want.text);
    const json merged = ExpectAligned(events, want.token_ids, chat);
    const json& values = chat ? merged["content"] : merged["token_logprobs"];
    ASSERT_EQ(values.size(), want.logprobs.size());
    for (size_t j = 0; j < values.size(); ++j) {
      EXPECT_EQ((chat ? values[j]["logprob"] : values[j]).get<float>(), want.logprobs[j].logprob);
    }
  }
}

TEST_F(HttpLogprobsTest, LogprobsRefusalsNameTheField) {
  const json messages = {{{"role", "user"}, {"content", "Hi"}}};
  const std::vector<std::tuple<std::string, json, std::string>> cases = {
      {"/v1/completions", {{"prompt", "Hi"}, {"logprobs", 21}}, "logprobs: must be in [0, 20]"},
      {"/v1/completions", {{"prompt", "Hi"}, {"logprobs", -1}}, "logprobs: must be in [0, 20]"},
      {"/v1/completions", {{"prompt", "Hi"}, {"logprobs", "3"}}, "logprobs: must be an integer"},
      {"/v1/chat/completions",
       {{"messages", messages}, {"logprobs", true}, {"top_logprobs", 21}},
       "top_logprobs: must be in [0, 20]"},
      {"/v1/chat/completions",
       {{"messages", messages}, {"top_logprobs", 2}},
       "top_logprobs: needs \"logprobs\": true"},
      {"/v1/chat/completions",
       {{"messages", messages}, {"logprobs", 1}},
       "logprobs: must be true or false"},
  };
  for (const auto& [path, body, message] : cases) {
    SCOPED_TRACE(body.dump());
    const Reply r = Post(path, body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.ErrorMessage(), message);
  }
  EXPECT_EQ(Post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 1}, {"logprobs", 20}}).status,
            200);
}

// Item 3: banning the greedy token (-100) gives the next most likely one (the raw logprobs
// still rank the banned one first); +100 forces a token at every step.
TEST_F(HttpLogprobsTest, LogitBiasBansAndForcesOverHttp) {
  const json base = {{"prompt", kPrompt}, {"max_tokens", 1}, {"temperature", 0}, {"logprobs", 2}};
  const Reply free_run = Post("/v1/completions", base);
  ASSERT_EQ(free_run.status, 200) << free_run.body;
  engine::GenerationRequest r = testing::GreedyRequest({}, 1);
  r.prompt = kPrompt;
  r.sampling.logprobs = 2;
  const engine::CollectedOutput want = testing::RunOne(*engine_, r);
  ASSERT_EQ(want.logprobs.size(), 1u);
  const int32_t best = want.logprobs[0].top[0].first;
  const int32_t second = want.logprobs[0].top[1].first;
  ASSERT_EQ(want.token_ids[0], best);
  EXPECT_EQ(free_run.Json()["choices"][0]["text"], Piece(best));

  json banned = base;
  banned["logit_bias"] = {{std::to_string(best), -100}};
  const Reply b = Post("/v1/completions", banned);
  ASSERT_EQ(b.status, 200) << b.body;
  const json lp = b.Json()["choices"][0]["logprobs"];
  EXPECT_EQ(b.Json()["choices"][0]["text"], Piece(second));
  EXPECT_EQ(lp["tokens"][0], Piece(second));
  EXPECT_EQ(lp["token_logprobs"][0].get<float>(), want.logprobs[0].top[1].second);
  EXPECT_EQ(lp["top_logprobs"][0][Piece(best)].get<float>(), want.logprobs[0].top[0].second);

  // Chat too: its first token's ranking from gRPC.
  v1::ChatRequest g;
  v1::ChatMessage* m = g.add_messages();
  m->set_role("user");
  m->set_content(kPrompt);
  g.mutable_params()->set_max_tokens(1);
  g.mutable_params()->set_temperature(0);
  g.mutable_params()->set_logprobs(2);
  const GrpcResult chat_free = Chat(g);
  ASSERT_TRUE(chat_free.status.ok()) << chat_free.status.error_message();
  ASSERT_EQ(chat_free.logprobs.size(), 1u);
  const v1::TokenLogprob& first = chat_free.logprobs[0];
  const Reply cb =
      Post("/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", kPrompt}}}},
            {"max_tokens", 1},
            {"temperature", 0},
            {"logit_bias", {{std::to_string(first.top_logprobs(0).token_id()), -100}}}});
  ASSERT_EQ(cb.status, 200) << cb.body;
  EXPECT_EQ(cb.Json()["choices"][0]["message"]["content"], Piece(first.top_logprobs(1).token_id()));

  // Forcing: a token the model would not pick, at every step.
  const int32_t forced = 300;
  ASSERT_FALSE(Piece(forced).empty());
  const Reply f = Post("/v1/completions", {{"prompt", kPrompt},
                                           {"max_tokens", 3},
                                           {"temperature", 0},
                                           {"ignore_eos", true},
                                           {"logit_bias", {{"300", 100}}}});
  ASSERT_EQ(f.status, 200) << f.body;
  EXPECT_EQ(f.Json()["choices"][0]["text"], Piece(forced) + Piece(forced) + Piece(forced));
  // Sampled too.
  const Reply s = Post("/v1/completions", {{"prompt", kPrompt},
                                           {"max_tokens", 3},
                                           {"temperature", 1},
                                           {"seed", 7},
                                           {"ignore_eos", true},
                                           {"logit_bias", {{"300", 100}}}});
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(s.Json()["choices"][0]["text"], Piece(forced) + Piece(forced) + Piece(forced));
}

TEST_F(HttpLogprobsTest, LogitBiasRefusalsNameTheField) {
  const int32_t vocab = engine_->model_info().vocab_size;
  const std::vector<std::pair<json, std::string>> cases = {
      {{{std::to_string(vocab), 1}},
       absl::StrCat("logit_bias: token ", vocab, " is outside the vocabulary [0, ", vocab, ")")},
      {{{"-1", 1}},
       absl::StrCat("logit_bias: token -1 is outside the vocabulary [0, ", vocab, ")")},
      {{{"5", 150}}, "logit_bias: the bias of token 5 (150) is outside [-100, 100]"},
      {{{"5", -100.5}}, "logit_bias: the bias of token 5 (-100.5) is outside [-100, 100]"},
      {{{"abc", 1}}, "logit_bias: key \"abc\" is not a token id"},
      {{{"5", "x"}}, "logit_bias: the bias of token 5 must be a number"},
      {json::array({1}), "logit_bias: must be an object of token id -> bias"},
  };
  for (const std::string path : {"/v1/completions", "/v1/chat/completions"}) {
    for (const auto& [bias, message] : cases) {
      SCOPED_TRACE(absl::StrCat(path, " ", bias.dump()));
      const Reply r = Post(path, {{"prompt", "Hi"},
                                  {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                  {"max_tokens", 1},
                                  {"logit_bias", bias}});
      EXPECT_EQ(r.status, 400) << r.body;
      EXPECT_EQ(r.ErrorMessage(), message);
    }
  }
  json many = json::object();
  for (int id = 0; id < 301; ++id) many[std::to_string(id)] = 1;
  const Reply r = Post("/v1/completions", {{"prompt", "Hi"}, {"logit_bias", many}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.ErrorMessage(), "logit_bias: 301 entries; at most 300");
  EXPECT_EQ(
      Post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 1}, {"logit_bias", json::object()}})
          .status,
      200);
}

// The gRPC field: the same ban and force, the engine's refusals as INVALID_ARGUMENT, Chat's
// params included.
TEST_F(HttpLogprobsTest, GrpcLogitBias) {
  v1::GenerateRequest g;
  g.set_prompt(kPrompt);
  g.set_max_tokens(1);
  g.set_temperature(0);
  g.set_logprobs(2);
  const GrpcResult free_run = Generate(g);
  ASSERT_TRUE(free_run.status.ok()) << free_run.status.error_message();
  ASSERT_EQ(free_run.logprobs.size(), 1u);
  const int32_t best = free_run.logprobs[0].top_logprobs(0).token_id();
  const int32_t second = free_run.logprobs[0].top_logprobs(1).token_id();
  ASSERT_EQ(free_run.token_ids, std::vector<int32_t>{best});

  v1::GenerateRequest banned = g;
  (*banned.mutable_logit_bias())[best] = -100;
  const GrpcResult b = Generate(banned);
  ASSERT_TRUE(b.status.ok()) << b.status.error_message();
  EXPECT_EQ(b.token_ids, std::vector<int32_t>{second});
  EXPECT_EQ(b.logprobs[0].logprob(), free_run.logprobs[0].top_logprobs(1).logprob());

  v1::GenerateRequest forced = g;
  forced.set_max_tokens(3);
  forced.set_ignore_eos(true);
  (*forced.mutable_logit_bias())[300] = 100;
  const GrpcResult f = Generate(forced);
  ASSERT_TRUE(f.status.ok()) << f.status.error_message();
  EXPECT_EQ(f.token_ids, (std::vector<int32_t>{300, 300, 300}));

  v1::ChatRequest chat;
  v1::ChatMessage* m = chat.add_messages();
  m->set_role("user");
  m->set_content(kPrompt);
  *chat.mutable_params() = forced;
  chat.mutable_params()->clear_prompt();
  const GrpcResult c = Chat(chat);
  ASSERT_TRUE(c.status.ok()) << c.status.error_message();
  EXPECT_EQ(c.token_ids, (std::vector<int32_t>{300, 300, 300}));

  const int32_t vocab = engine_->model_info().vocab_size;
  v1::GenerateRequest outside = g;
  (*outside.mutable_logit_bias())[vocab] = 1;
  const GrpcResult o = Generate(outside);
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(o.status.error_message(), absl::StrCat("logit_bias: token ", vocab,
                                                   " is outside the vocabulary [0, ", vocab, ")"));
  v1::GenerateRequest strong = g;
  (*strong.mutable_logit_bias())[5] = 101;
  const GrpcResult s = Generate(strong);
  EXPECT_EQ(s.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.status.error_message(), HasSubstr("logit_bias: the bias of token 5 (101)"));
}

// Batch invariance: a biased request submitted beside an unbiased one leaves the unbiased
// one's tokens (and logprobs) as they are alone, and gets its own alone tokens.
TEST_F(HttpLogprobsTest, LogitBiasIsPerRequest) {
  engine::GenerationRequest plain = testing::GreedyRequest({}, 8);
  plain.prompt = kPrompt;
  plain.sampling.logprobs = 1;
  engine::GenerationRequest biased = plain;
  const engine::CollectedOutput alone = testing::RunOne(*engine_, plain);
  biased.sampling.logit_bias = {{alone.token_ids[0], -100.f}, {alone.token_ids[1], -100.f}};
  const engine::CollectedOutput biased_alone = testing::RunOne(*engine_, biased);
  EXPECT_NE(biased_alone.token_ids, alone.token_ids);
  const std::vector<engine::CollectedOutput> together =
      testing::RunAll(*engine_, {plain, biased, plain});
  for (const size_t i : {size_t{0}, size_t{2}}) {
    EXPECT_EQ(together[i].token_ids, alone.token_ids) << i;
    ASSERT_EQ(together[i].logprobs.size(), alone.logprobs.size());
    for (size_t j = 0; j < alone.logprobs.size(); ++j) {
      EXPECT_EQ(together[i].logprobs[j].logprob, alone.logprobs[j].logprob) << i << " " << j;
    }
  }
  EXPECT_EQ(together[1].token_ids, biased_alone.token_ids);
}

}  // namespace
}  // namespace pagoda
