// Issue 27 item 4 over real HTTP (cpp-httplib) and gRPC on loopback with stories260K: echo
// on /v1/completions and prompt logprobs. lm-evaluation-harness's log-likelihood request
// (context + continuation as one prompt of token ids, echo, logprobs 1, max_tokens 0) is
// answered with the prompt's text and its tokens' logprobs, the first null, whose sum over
// the continuation equals the logprobs the engine reports generating that continuation; echo
// with generation, streamed and not; gRPC's prompt_logprobs; the refusals.
#include <httplib.h>

#include <memory>
#include <string>
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

namespace pagoda {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct Reply {
  int status = -1;
  std::string body;
  json Json() const { return json::parse(body, nullptr, false); }
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

class HttpEchoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = testing::StoriesEngine({.block_size = 4});  // prefix caching on
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

  Reply Post(const json& body) {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(60, 0);
    httplib::Result r = c.Post("/v1/completions", body.dump(), "application/json");
    if (!r) return {};
    return {r->status, r->body};
  }

  // Every message of a gRPC Generate stream.
  std::vector<v1::GenerateResponse> Generate(const v1::GenerateRequest& request,
                                             grpc::Status* status) {
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, request);
    std::vector<v1::GenerateResponse> out;
    v1::GenerateResponse r;
    while (reader->Read(&r)) out.push_back(r);
    *status = reader->Finish();
    return out;
  }

  std::string Piece(int32_t id) const { return engine_->tokenizer().TokenBytes(id); }

  // The greedy continuation of `context` over gRPC (the engine's own logprobs, top 1).
  void Continue(const std::vector<int32_t>& context, int32_t n, std::vector<int32_t>* tokens,
                std::vector<float>* logprobs) {
    v1::GenerateRequest g;
    for (int32_t id : context) g.add_prompt_token_ids(id);
    g.set_max_tokens(n);
    g.set_temperature(0);
    g.set_ignore_eos(true);
    g.set_logprobs(1);
    grpc::Status status;
    for (const v1::GenerateResponse& r : Generate(g, &status)) {
      tokens->insert(tokens->end(), r.token_ids().begin(), r.token_ids().end());
      for (const v1::TokenLogprob& lp : r.logprobs()) logprobs->push_back(lp.logprob());
    }
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(tokens->size(), static_cast<size_t>(n));
  }

  // An echoed completions logprobs object over the prompt `ids` (then `generated` more):
  // the prompt's pieces, the first token's logprob and top null, the others' top holding the
  // chosen token, offsets increasing from 0 over the prompt's pieces.
  void ExpectEchoShape(const json& lp, const std::vector<int32_t>& ids, size_t generated) {
    ASSERT_TRUE(lp.is_object()) << lp;
    const size_t n = ids.size() + generated;
    ASSERT_EQ(lp["tokens"].size(), n) << lp;
    ASSERT_EQ(lp["token_logprobs"].size(), n);
    ASSERT_EQ(lp["top_logprobs"].size(), n);
    ASSERT_EQ(lp["text_offset"].size(), n);
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());
    EXPECT_TRUE(lp["top_logprobs"][0].is_null());
    int64_t offset = 0;
    for (size_t j = 0; j < ids.size(); ++j) {
      SCOPED_TRACE(j);
      EXPECT_EQ(lp["tokens"][j], Piece(ids[j]));
      EXPECT_EQ(lp["text_offset"][j], offset);
      offset += static_cast<int64_t>(Piece(ids[j]).size());  // ASCII
      if (j == 0) continue;
      ASSERT_TRUE(lp["token_logprobs"][j].is_number());
      EXPECT_EQ(lp["top_logprobs"][j][Piece(ids[j])], lp["token_logprobs"][j]);
    }
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

TEST_F(HttpEchoTest, LmEvalLoglikelihoodRequestScoresTheContinuation) {
  const std::vector<int32_t> context = engine_->tokenizer().Encode("Once upon a time", true);
  std::vector<int32_t> continuation;
  std::vector<float> want;
  Continue(context, 10, &continuation, &want);
  std::vector<int32_t> prompt = context;
  prompt.insert(prompt.end(), continuation.begin(), continuation.end());
  const json req = {
      {"prompt", prompt}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 0}, {"temperature", 0}};
  // Twice: the second finds the prompt in the prefix cache, and must score it all the same.
  json first;
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run);
    const Reply reply = Post(req);
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json body = reply.Json();
    const json& choice = body["choices"][0];
    EXPECT_EQ(choice["text"], *engine_->Detokenize(prompt));
    EXPECT_EQ(choice["finish_reason"], "length");
    EXPECT_EQ(body["usage"]["completion_tokens"], 0);
    EXPECT_EQ(body["usage"]["prompt_tokens"], prompt.size());
    const json& lp = choice["logprobs"];
    ExpectEchoShape(lp, prompt, 0);
    // lm-eval: the sum over the continuation, and whether each token was the greedy one.
    double sum = 0, sum_want = 0;
    for (size_t j = 0; j < continuation.size(); ++j) {
      const json& got = lp["token_logprobs"][context.size() + j];
      EXPECT_EQ(got.get<float>(), want[j]) << j;
      sum += got.get<double>();
      sum_want += want[j];
      double best = -1e30;
      for (const auto& [text, v] : lp["top_logprobs"][context.size() + j].items()) {
        best = std::max(best, v.get<double>());
      }
      EXPECT_EQ(got.get<double>(), best) << j;
    }
    EXPECT_NEAR(sum, sum_want, 1e-5);
    if (run == 0) first = lp;
    EXPECT_EQ(lp, first);
  }
}

TEST_F(HttpEchoTest, EchoWithGenerationStreamedAndNot) {
  const std::string prompt = "Once upon a time";
  const std::vector<int32_t> ids = engine_->tokenizer().Encode(prompt, true);
  const json plain_req = {{"prompt", prompt},
                          {"max_tokens", 6},
                          {"temperature", 0},
                          {"ignore_eos", true},
                          {"logprobs", 2}};
  const Reply plain = Post(plain_req);
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json plain_choice = plain.Json()["choices"][0];

  json req = plain_req;
  req["echo"] = true;
  const Reply whole = Post(req);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json choice = whole.Json()["choices"][0];
  EXPECT_EQ(choice["text"], prompt + plain_choice["text"].get<std::string>());
  const json& lp = choice["logprobs"];
  ExpectEchoShape(lp, ids, 6);
  // The generated tokens as without echo, their offsets after the prompt's text.
  const json& plain_lp = plain_choice["logprobs"];
  for (size_t j = 0; j < 6; ++j) {
    SCOPED_TRACE(j);
    EXPECT_EQ(lp["tokens"][ids.size() + j], plain_lp["tokens"][j]);
    EXPECT_EQ(lp["token_logprobs"][ids.size() + j], plain_lp["token_logprobs"][j]);
    EXPECT_EQ(lp["top_logprobs"][ids.size() + j], plain_lp["top_logprobs"][j]);
    EXPECT_EQ(lp["text_offset"][ids.size() + j],
              plain_lp["text_offset"][j].get<int64_t>() + static_cast<int64_t>(prompt.size()));
  }

  // Streamed: the prompt's text and its tokens in the first event, the same logprobs merged.
  req["stream"] = true;
  const Reply streamed = Post(req);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const std::vector<json> events = Events(streamed.body);
  ASSERT_GE(events.size(), 2u);
  const json& first = events[0]["choices"][0];
  EXPECT_TRUE(absl::StartsWith(first["text"].get<std::string>(), prompt)) << first;
  ASSERT_TRUE(first["logprobs"].is_object()) << first;
  EXPECT_GE(first["logprobs"]["tokens"].size(), ids.size());
  EXPECT_TRUE(first["logprobs"]["token_logprobs"][0].is_null());
  std::string text;
  json merged = {{"tokens", json::array()},
                 {"token_logprobs", json::array()},
                 {"top_logprobs", json::array()},
                 {"text_offset", json::array()}};
  for (const json& e : events) {
    if (e["choices"].size() != 1) continue;
    const json& c = e["choices"][0];
    text += c["text"].get<std::string>();
    if (c["logprobs"].is_null()) continue;
    for (auto& [key, value] : c["logprobs"].items()) {
      for (const json& v : value) merged[key].push_back(v);
    }
  }
  EXPECT_EQ(text, choice["text"]);
  EXPECT_EQ(merged, lp);
}

TEST_F(HttpEchoTest, EchoAloneAndRefusals) {
  // Echo without logprobs, nothing generated: the prompt's text, no logprobs.
  const Reply echo = Post({{"prompt", "Tom and Sue"}, {"echo", true}, {"max_tokens", 0}});
  ASSERT_EQ(echo.status, 200) << echo.body;
  const json choice = echo.Json()["choices"][0];
  EXPECT_EQ(choice["text"], "Tom and Sue");
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_TRUE(choice["logprobs"].is_null());
  // Echo false (the default) keeps the text the completion's.
  const Reply off = Post({{"prompt", "Tom and Sue"}, {"echo", false}, {"max_tokens", 2}});
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_FALSE(absl::StartsWith(off.Json()["choices"][0]["text"].get<std::string>(), "Tom"));
  // max_tokens 0 without echo, and a non-boolean echo, are refused naming the field.
  const Reply zero = Post({{"prompt", "Tom and Sue"}, {"max_tokens", 0}});
  EXPECT_EQ(zero.status, 400) << zero.body;
  EXPECT_THAT(zero.body, HasSubstr("max_tokens: must be positive"));
  const Reply bad = Post({{"prompt", "Tom and Sue"}, {"echo", "yes"}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("echo"));
}

TEST_F(HttpEchoTest, GrpcPromptLogprobsEqualHttpEcho) {
  const std::vector<int32_t> ids = engine_->tokenizer().Encode("The little dog ran", true);
  v1::GenerateRequest g;
  for (int32_t id : ids) g.add_prompt_token_ids(id);
  g.set_max_tokens(0);
  g.set_temperature(0);
  g.set_prompt_logprobs(2);
  grpc::Status status;
  const std::vector<v1::GenerateResponse> messages = Generate(g, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_FALSE(messages.empty());
  v1::GenerateResponse all;
  for (const v1::GenerateResponse& m : messages) all.MergeFrom(m);
  EXPECT_EQ(all.token_ids_size(), 0);
  EXPECT_EQ(all.finish_reason(), "length");
  ASSERT_EQ(all.prompt_token_ids_size(), static_cast<int>(ids.size()));
  ASSERT_EQ(all.prompt_logprobs_size(), static_cast<int>(ids.size()) - 1);

  const Reply reply = Post(
      {{"prompt", ids}, {"echo", true}, {"logprobs", 2}, {"max_tokens", 0}, {"temperature", 0}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json lp = reply.Json()["choices"][0]["logprobs"];
  ExpectEchoShape(lp, ids, 0);
  for (size_t j = 1; j < ids.size(); ++j) {
    SCOPED_TRACE(j);
    const v1::TokenLogprob& want = all.prompt_logprobs(static_cast<int>(j) - 1);
    EXPECT_EQ(all.prompt_token_ids(static_cast<int>(j)), ids[j]);
    EXPECT_EQ(want.token_id(), ids[j]);
    EXPECT_EQ(lp["token_logprobs"][j].get<float>(), want.logprob());
    ASSERT_EQ(want.top_logprobs_size(), 2);
    for (const v1::TopLogprob& t : want.top_logprobs()) {
      EXPECT_EQ(lp["top_logprobs"][j][Piece(t.token_id())].get<float>(), t.logprob());
    }
  }
  // max_tokens 0 without prompt_logprobs is refused.
  g.clear_prompt_logprobs();
  Generate(g, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("max_tokens"));
}

}  // namespace
}  // namespace pagoda
