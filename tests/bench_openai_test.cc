// pagoda-bench --backend openai: its server-sent-event parser and chunk accounting, and the
// binary against a real HTTP server (cpp-httplib) that speaks OpenAI's streamed completions
// the way llama.cpp's llama-server does (a text chunk per token, a usage chunk, [DONE]).
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/openai_call.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_process.h"
#include "tests/test_util.h"

namespace pagoda::bench {
namespace {

using ::pagoda::testing::BinDir;
using ::pagoda::testing::MakeTempDir;
using ::testing::ElementsAre;

std::vector<std::string> FeedAll(SseParser& parser, const std::vector<std::string>& pieces) {
  std::vector<std::string> events;
  for (const std::string& piece : pieces) {
    parser.Feed(piece, [&](const std::string& data) { events.push_back(data); });
  }
  return events;
}

TEST(SseParserTest, EventsSplitAnywhereAreReassembled) {
  SseParser parser;
  EXPECT_THAT(FeedAll(parser, {"da", "ta: {\"a\":1}\n", "\n", "data:[DONE]\r\n\r", "\n"}),
              ElementsAre("{\"a\":1}", "[DONE]"));
}

TEST(SseParserTest, CommentsAndOtherFieldsAreSkippedAndDataLinesJoin) {
  SseParser parser;
  EXPECT_THAT(FeedAll(parser, {": keep-alive\n\nevent: x\nid: 3\n\n", "data: one\ndata: two\n\n",
                               "data: unterminated"}),
              ElementsAre("one\ntwo"));
}

TEST(CompletionChunkTest, TextChunksCountAsTokensAndUsageIsKept) {
  RequestRecord record;
  ApplyCompletionChunk(nlohmann::json::parse(R"({"choices":[{"text":"a","finish_reason":null}]})"),
                       1.0, &record);
  ApplyCompletionChunk(nlohmann::json::parse(R"({"choices":[{"text":"","finish_reason":null}]})"),
                       2.0, &record);
  ApplyCompletionChunk(
      nlohmann::json::parse(R"({"choices":[{"text":"","finish_reason":"length"}]})"), 3.0, &record);
  ApplyCompletionChunk(
      nlohmann::json::parse(
          R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}})"),
      4.0, &record);
  EXPECT_THAT(record.chunk_times, ElementsAre(1.0, 2.0));
  EXPECT_THAT(record.chunk_tokens, ElementsAre(1, 1));
  EXPECT_EQ(record.finish_reason, "length");
  EXPECT_EQ(record.prompt_tokens, 7);
  EXPECT_EQ(record.completion_tokens, 2);
  EXPECT_EQ(record.status, "OK");
  ApplyCompletionChunk(nlohmann::json::parse(R"({"error":{"message":"boom","type":"x"}})"), 5.0,
                       &record);
  EXPECT_EQ(record.status, "STREAM_ERROR");
  EXPECT_EQ(record.error, "boom");
}

TEST(CompletionBodyTest, TokenIdsStreamWithUsage) {
  v1::GenerateRequest request;
  request.add_prompt_token_ids(5);
  request.add_prompt_token_ids(9);
  request.set_max_tokens(3);
  request.set_ignore_eos(true);
  EXPECT_EQ(CompletionBody(request, "m"),
            nlohmann::json::parse(R"({"model":"m","prompt":[5,9],"max_tokens":3,
              "temperature":0.0,"ignore_eos":true,"stream":true,
              "stream_options":{"include_usage":true}})"));
}

TEST(ParseOpenAiServerTest, HostPortAndUrlForms) {
  EXPECT_EQ(ParseOpenAiServer("127.0.0.1:8080")->port, 8080);
  EXPECT_EQ(ParseOpenAiServer("http://localhost:80/")->host, "localhost");
  EXPECT_FALSE(ParseOpenAiServer("https://x:1").ok());
  EXPECT_FALSE(ParseOpenAiServer("x:99999").ok());
  EXPECT_FALSE(ParseOpenAiServer("x:1/v1").ok());
  EXPECT_FALSE(ParseOpenAiServer("nohost").ok());
}

// An OpenAI-style completions server on a real socket: every `fail_every`-th request gets
// 429 with OpenAI's error body; the others stream `max_tokens` text chunks, a finish chunk,
// a usage chunk and [DONE]. It keeps every request body it was sent.
class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(int fail_every) : fail_every_(fail_every) {
    server_.Get("/v1/models", [](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != "Bearer k") {
        res.status = 401;
        res.set_content(R"({"error":{"message":"bad key","type":"auth","code":401}})",
                        "application/json");
        return;
      }
      res.set_content(R"({"object":"list","data":[{"id":"fake-http","object":"model",
                         "meta":{"n_vocab":64,"n_ctx":1024}}]})",
                      "application/json");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const nlohmann::json body = nlohmann::json::parse(req.body);
      {
        std::lock_guard<std::mutex> lock(mu_);
        bodies_.push_back(body);
      }
      if ((calls_.fetch_add(1) + 1) % fail_every_ == 0) {
        res.status = 429;
        res.set_header("Retry-After", "1");
        res.set_content(R"({"error":{"message":"slow down","type":"rate_limit","code":429}})",
                        "application/json");
        return;
      }
      const int n = body["max_tokens"].get<int>();
      const int prompt = static_cast<int>(body["prompt"].size());
      res.set_chunked_content_provider(
          "text/event-stream", [n, prompt](size_t, httplib::DataSink& sink) {
            auto send = [&](const std::string& data) {
              const std::string event = "data: " + data + "\n\n";
              sink.write(event.data(), event.size());
            };
            for (int i = 0; i < n; ++i) {
              send(R"({"choices":[{"text":"x","index":0,"finish_reason":null}]})");
            }
            send(R"({"choices":[{"text":"","index":0,"finish_reason":"length"}]})");
            send(absl::StrCat(R"({"choices":[],"usage":{"prompt_tokens":)", prompt,
                              R"(,"completion_tokens":)", n, "}}"));
            send("[DONE]");
            sink.done();
            return true;
          });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // bind_to_any_port already listens: connections queue until the accept loop runs.
  }
  ~FakeOpenAiServer() {
    server_.stop();
    thread_.join();
  }

  std::string address() const { return absl::StrCat("http://127.0.0.1:", port_); }
  std::vector<nlohmann::json> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }

 private:
  const int fail_every_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> calls_{0};
  std::mutex mu_;
  std::vector<nlohmann::json> bodies_;
};

struct BenchRun {
  int exit_code = -1;
  std::string stderr_text;
  nlohmann::json json;
};

BenchRun RunOpenAiBench(const std::string& server, std::vector<std::string> flags) {
  const std::string dir = MakeTempDir();
  std::vector<std::string> args = {
      BinDir() + "/pagoda-bench", "--backend=openai", "--server", server, "--json-out",
      dir + "/result.json"};
  args.insert(args.end(), flags.begin(), flags.end());
  BenchRun run;
  run.exit_code = pagoda::testing::WaitForExit(
      pagoda::testing::SpawnProcess(args, dir + "/stdout", dir + "/stderr"));
  run.stderr_text = pagoda::testing::ReadFileOrDie(dir + "/stderr");
  if (run.exit_code == 0) {
    run.json = nlohmann::json::parse(pagoda::testing::ReadFileOrDie(dir + "/result.json"));
  }
  return run;
}

TEST(BenchOpenAiBackendTest, StreamsCountTokensAndHttpErrorsExactly) {
  FakeOpenAiServer server(/*fail_every=*/5);
  const BenchRun run =
      RunOpenAiBench(server.address(), {"--api-key=k", "--num-prompts=20", "--concurrency=4",
                                        "--input-len=8", "--output-len=6", "--ignore-eos"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.json["completed"], 16);
  EXPECT_EQ(run.json["failed"], 4);
  EXPECT_EQ(run.json["errors"], nlohmann::json({{"HTTP_429", 4}}));
  EXPECT_EQ(run.json["total_output_tokens"], 16 * 6);
  EXPECT_EQ(run.json["total_input_tokens"], 16 * 8);
  EXPECT_EQ(run.json["model_id"], "fake-http");
  for (size_t i = 0; i < run.json["itls"].size(); ++i) {
    if (run.json["statuses"][i] == "OK") {
      EXPECT_EQ(run.json["itls"][i].size(), 5u);
    }
  }
  const std::vector<nlohmann::json> bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 20u);
  for (const nlohmann::json& body : bodies) {
    EXPECT_EQ(body["model"], "fake-http");
    EXPECT_EQ(body["prompt"].size(), 8u);
    for (const nlohmann::json& id : body["prompt"]) {
      EXPECT_GE(id.get<int>(), 3);
      EXPECT_LT(id.get<int>(), 64);
    }
    EXPECT_EQ(body["max_tokens"], 6);
    EXPECT_EQ(body["stream"], true);
    EXPECT_EQ(body["stream_options"]["include_usage"], true);
    EXPECT_EQ(body["ignore_eos"], true);
  }
}

TEST(BenchOpenAiBackendTest, AWrongKeyOrNoServerFailsAtStart) {
  FakeOpenAiServer server(/*fail_every=*/1000);
  const BenchRun bad = RunOpenAiBench(server.address(), {"--api-key=wrong", "--num-prompts=2"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.stderr_text, ::testing::HasSubstr("401: bad key"));
  EXPECT_EQ(RunOpenAiBench("127.0.0.1:1", {"--num-prompts=2"}).exit_code, 1);
  EXPECT_EQ(RunOpenAiBench("https://127.0.0.1:1", {}).exit_code, 2);
  EXPECT_EQ(server.bodies().size(), 0u);
}

// The same closed-loop load over gRPC and over pagoda's own HTTP door: every request
// completes on both, with the same token totals, and the daemon's counter agrees.
TEST(BenchOpenAiBackendTest, GrpcAndHttpDoorsServeTheSameLoad) {
  const std::string dir = MakeTempDir();
  const std::string model = dir + "/tiny.gguf";
  ASSERT_EQ(pagoda::testing::WaitForExit(pagoda::testing::SpawnProcess(
                {BinDir() + "/pagoda", "make-model", "--preset", "tiny", "--out", model},
                dir + "/make.out", dir + "/make.err")),
            0);
  pagoda::testing::DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start({"--model", model, "--http-port", "0"}));
  ASSERT_GT(daemon.http_port(), 0);
  const auto generated = [&] {
    return static_cast<long long>(
        pagoda::testing::MetricValue(pagoda::testing::HttpGet(daemon.metrics_port(), "/metrics"),
                                     "pagoda:generation_tokens_total"));
  };
  const std::vector<std::string> load = {"--num-prompts=24", "--concurrency=6", "--input-len=20",
                                         "--output-len=8",   "--ignore-eos",    "--seed=2"};
  const long long before = generated();
  std::vector<std::string> http_flags = load;
  const BenchRun http = RunOpenAiBench(absl::StrCat("127.0.0.1:", daemon.http_port()), http_flags);
  ASSERT_EQ(http.exit_code, 0) << http.stderr_text;
  const long long middle = generated();
  // The gRPC run: the same binary without --backend=openai (the later flag wins).
  std::vector<std::string> grpc_flags = load;
  grpc_flags.push_back("--backend=grpc");
  const BenchRun grpc = RunOpenAiBench(daemon.address(), grpc_flags);
  ASSERT_EQ(grpc.exit_code, 0) << grpc.stderr_text;
  for (const BenchRun* run : {&http, &grpc}) {
    EXPECT_EQ(run->json["completed"], 24);
    EXPECT_EQ(run->json["failed"], 0);
    EXPECT_EQ(run->json["total_input_tokens"], 24 * 20);
    EXPECT_EQ(run->json["total_output_tokens"], 24 * 8);
    EXPECT_EQ(run->json["output_lens"], nlohmann::json(std::vector<int>(24, 8)));
  }
  EXPECT_EQ(middle - before, 24 * 8);
  EXPECT_EQ(generated() - middle, 24 * 8);
  EXPECT_EQ(http.json["model_id"], "tiny");
}

}  // namespace
}  // namespace pagoda::bench
