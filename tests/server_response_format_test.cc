// GenerateRequest.response_format on the gRPC door (stories260K behind a real server):
// the wire field parses into the engine's grammar, JSON Schema outputs validate (an
// independent checker) with properties in the order the schema gives them, json_object
// parses, a GBNF grammar's outputs are in its language, Chat takes it through its params,
// and a schema or grammar the compiler refuses is INVALID_ARGUMENT naming the field.
#include <memory>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/generation_client.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagoda/v1/generation.grpc.pb.h"
#include "server/request_convert.h"
#include "server/server.h"
#include "tests/engine_test_util.h"
#include "tests/json_schema_checker.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using nlohmann::json;

// Properties listed out of alphabetical order: the output must follow the schema's order.
constexpr char kSchema[] = R"({"type": "object", "properties": {
    "zeta": {"type": "string", "maxLength": 12}, "alpha": {"enum": ["cat", "dog"]},
    "count": {"type": "integer"}},
    "required": ["zeta", "alpha", "count"], "additionalProperties": false})";

// Output that stays in the grammar's language; the same language as a std::regex.
constexpr char kGbnf[] = R"(# a sentence about a pet
root ::= "The " pet " sat on " word "."
pet  ::= "cat" | "dog"
word ::= [a-z]{2,6})";
constexpr char kGbnfRegex[] = "The (cat|dog) sat on [a-z]{2,6}\\.";

struct Streamed {
  grpc::Status status;
  std::string text;
  std::string finish_reason;
};

v1::GenerateRequest Sampled(int seed) {
  v1::GenerateRequest r;
  r.set_prompt("Once upon a time");
  r.set_max_tokens(200);
  r.set_temperature(1);
  r.set_seed(seed);
  return r;
}

class ServerResponseFormatTest : public ::testing::Test {
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
                                         .drain_timeout = absl::Seconds(5)},
                                        engine_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = *client::MakeChannel({.address = absl::StrCat("127.0.0.1:", server_->port())});
    client_ = std::make_unique<client::GenerationClient>(channel_, "");
  }

  void TearDown() override {
    server_.reset();
    if (engine_) engine_->Stop();
  }

  Streamed Generate(const v1::GenerateRequest& request) {
    Streamed s;
    s.status = client_->Generate(request, [&](const v1::GenerateResponse& r) {
      s.text += r.text();
      if (!r.finish_reason().empty()) s.finish_reason = r.finish_reason();
    });
    return s;
  }

  Streamed Chat(const v1::ChatRequest& request) {
    auto stub = v1::Generation::NewStub(channel_);
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
        stub->Chat(&context, request);
    Streamed s;
    v1::GenerateResponse r;
    while (reader->Read(&r)) {
      s.text += r.text();
      if (!r.finish_reason().empty()) s.finish_reason = r.finish_reason();
    }
    s.status = reader->Finish();
    return s;
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<client::GenerationClient> client_;
};

// A serialized public GenerateRequest parses through the server's wire twin.
absl::StatusOr<engine::GenerationRequest> ThroughTheWire(const v1::GenerateRequest& request) {
  grpc::Slice slice(request.SerializeAsString());
  grpc::ByteBuffer buffer(&slice, 1);
  std::string id;
  return server::ParseGenerateRequest(buffer, &id);
}

TEST(ResponseFormatWireTest, EachFormatBecomesAGrammarAndUnsetLeavesNone) {
  v1::GenerateRequest r = Sampled(1);
  auto none = ThroughTheWire(r);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->sampling.grammar, nullptr);
  r.mutable_response_format()->mutable_json_object();
  auto object = ThroughTheWire(r);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_NE(object->sampling.grammar, nullptr);
  r.mutable_response_format()->set_json_schema(kSchema);
  auto schema = ThroughTheWire(r);
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_NE(schema->sampling.grammar, nullptr);
  r.mutable_response_format()->set_grammar(kGbnf);
  auto gbnf = ThroughTheWire(r);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status();
  EXPECT_NE(gbnf->sampling.grammar, nullptr);
  EXPECT_EQ(gbnf->sampling.temperature, 1.f);  // the other fields still convert
}

TEST_F(ServerResponseFormatTest, JsonSchemaOutputsValidateInTheSchemasPropertyOrder) {
  const json schema = json::parse(kSchema);
  for (int seed = 0; seed < 8; ++seed) {
    v1::GenerateRequest r = Sampled(seed);
    r.mutable_response_format()->set_json_schema(kSchema);
    const Streamed s = Generate(r);
    ASSERT_TRUE(s.status.ok()) << s.status.error_message();
    EXPECT_EQ(s.finish_reason, "stop") << s.text;
    const json value = json::parse(s.text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(value.is_discarded()) << s.text;
    EXPECT_EQ(grammar::testing::CheckSchema(value, schema, schema), "") << s.text;
    EXPECT_LT(s.text.find("\"zeta\""), s.text.find("\"alpha\"")) << s.text;
    EXPECT_LT(s.text.find("\"alpha\""), s.text.find("\"count\"")) << s.text;
  }
}

TEST_F(ServerResponseFormatTest, JsonObjectParsesAndGbnfOutputsAreInTheLanguage) {
  const std::regex language(kGbnfRegex);
  int whole = 0;
  for (int seed = 0; seed < 8; ++seed) {
    v1::GenerateRequest r = Sampled(seed);
    r.mutable_response_format()->mutable_json_object();
    const Streamed object = Generate(r);
    ASSERT_TRUE(object.status.ok()) << object.status.error_message();
    if (object.finish_reason == "stop") {
      ++whole;
      EXPECT_TRUE(json::parse(object.text, nullptr, false).is_object()) << object.text;
    } else {
      // A sampled story may run on inside one string: cut by max_tokens, a prefix.
      EXPECT_EQ(object.finish_reason, "length");
      grammar::Matcher prefix(grammar::JsonObjectGrammar());
      EXPECT_TRUE(prefix.Advance(object.text)) << object.text;
    }

    r.mutable_response_format()->set_grammar(kGbnf);
    const Streamed sentence = Generate(r);
    ASSERT_TRUE(sentence.status.ok()) << sentence.status.error_message();
    EXPECT_EQ(sentence.finish_reason, "stop") << sentence.text;
    EXPECT_TRUE(std::regex_match(sentence.text, language)) << sentence.text;
  }
  EXPECT_EQ(whole, 6);  // seeds 0 and 3 write one long string (the same on every run)
}

TEST_F(ServerResponseFormatTest, ChatTakesTheFormatThroughItsParams) {
  const json schema = json::parse(kSchema);
  for (int seed = 0; seed < 4; ++seed) {
    v1::ChatRequest chat;
    v1::ChatMessage* m = chat.add_messages();
    m->set_role("user");
    m->set_content("Describe a pet as JSON.");
    v1::GenerateRequest* params = chat.mutable_params();
    params->set_max_tokens(200);
    params->set_seed(seed);
    params->mutable_response_format()->set_json_schema(kSchema);
    const Streamed s = Chat(chat);
    ASSERT_TRUE(s.status.ok()) << s.status.error_message();
    EXPECT_EQ(s.finish_reason, "stop") << s.text;
    const json value = json::parse(s.text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << s.text;
    EXPECT_EQ(grammar::testing::CheckSchema(value, schema, schema), "") << s.text;
  }
}

TEST_F(ServerResponseFormatTest, RefusedSchemasAndGrammarsNameTheFieldAndTheDaemonServesOn) {
  struct Case {
    std::function<void(v1::ResponseFormat*)> set;
    std::string message_prefix;
  };
  const Case cases[] = {
      {[](auto* f) {
         f->set_json_schema(R"({"type": "object", "properties": {"age": {"minimum": 0}}})");
       },
       "response_format.json_schema: json schema: unsupported keyword 'minimum' at "
       "/properties/age"},
      {[](auto* f) { f->set_json_schema("{not json"); }, "response_format.json_schema: "},
      {[](auto* f) { f->set_grammar("root ::= missing"); }, "response_format.grammar: gbnf: "},
      {[](auto* f) { f->set_grammar("start ::= \"x\""); }, "response_format.grammar: gbnf: "},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest r = Sampled(0);
    c.set(r.mutable_response_format());
    const Streamed s = Generate(r);
    EXPECT_EQ(s.status.error_code(), grpc::INVALID_ARGUMENT) << s.status.error_message();
    EXPECT_EQ(s.status.error_message().rfind(c.message_prefix, 0), 0u) << s.status.error_message();
  }
  v1::GenerateRequest ok = Sampled(0);
  ok.set_max_tokens(4);
  EXPECT_TRUE(Generate(ok).status.ok());
}

}  // namespace
}  // namespace pagoda
