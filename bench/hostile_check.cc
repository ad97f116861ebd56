// pagoda-hostile-check: sends a running daemon the grammar, schema and tool requests that
// once froze or crashed it (issue 44) while a second client keeps asking for 16-token
// completions, and prints, per payload, its answer (status and the start of the message),
// how long it took, the slowest of the other client's completions meanwhile, and the
// daemon's resident memory after it. A benchmark: it prints numbers, asserts nothing; the
// tests assert the behaviour (tests/grammar_budget_test.cc and others).
//
//   pagoda serve --http-port 8080 --chat-template Qwen2.5.jinja &
//   pagoda-hostile-check --http 127.0.0.1:8080 --grpc 127.0.0.1:50051 --pid $!
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "pagoda/v1/generation.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The daemon's resident set in MiB (0 when unknown).
double RssMib(int pid) {
  if (pid <= 0) return 0;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

struct Target {
  std::string http_host;
  int http_port = 0;
  std::string grpc;
  int pid = 0;
};

// What one payload got.
struct Outcome {
  std::string answer;  // "200", "400 ..." or a gRPC code
  double seconds = 0;
};

std::pair<std::string, int> HostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  return {address.substr(0, colon), std::stoi(address.substr(colon + 1))};
}

Outcome PostJson(const Target& t, const std::string& path, const std::string& body) {
  httplib::Client c(t.http_host, t.http_port);
  c.set_read_timeout(120, 0);
  c.set_write_timeout(120, 0);
  const Clock::time_point start = Clock::now();
  httplib::Result r = c.Post(path.c_str(), body, "application/json");
  Outcome o;
  o.seconds = Seconds(Clock::now() - start);
  if (!r) {
    o.answer = absl::StrCat("no answer (", httplib::to_string(r.error()), ")");
    return o;
  }
  o.answer = absl::StrCat(r->status);
  const json parsed = json::parse(r->body, nullptr, false);
  if (parsed.is_object() && parsed.contains("error")) {
    o.answer += " " + parsed["error"].value("message", "").substr(0, 90);
  } else if (parsed.is_object() && parsed.contains("choices")) {
    const json& c0 = parsed["choices"][0];
    std::string text = c0.contains("text") ? c0["text"].get<std::string>()
                       : c0["message"]["content"].is_string()
                           ? c0["message"]["content"].get<std::string>()
                           : c0["message"].dump();
    o.answer += " " + json(text.substr(0, 60)).dump() + " " + c0.value("finish_reason", "");
  }
  return o;
}

// A stub that may send messages up to the server's 64 MiB.
std::unique_ptr<pagoda::v1::Generation::Stub> Stub(const Target& t) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  return pagoda::v1::Generation::NewStub(
      grpc::CreateCustomChannel(t.grpc, grpc::InsecureChannelCredentials(), args));
}

Outcome GrpcGenerate(const Target& t, const std::string& schema) {
  auto stub = Stub(t);
  pagoda::v1::GenerateRequest req;
  req.set_prompt("Once upon a time");
  req.set_max_tokens(16);
  req.mutable_response_format()->set_json_schema(schema);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  const Clock::time_point start = Clock::now();
  auto reader = stub->Generate(&ctx, req);
  pagoda::v1::GenerateResponse r;
  while (reader->Read(&r)) {
  }
  const grpc::Status s = reader->Finish();
  return {absl::StrCat(s.error_code(), " ", s.error_message().substr(0, 90)),
          Seconds(Clock::now() - start)};
}

Outcome GrpcDetokenize(const Target& t, int64_t ids) {
  auto stub = Stub(t);
  pagoda::v1::DetokenizeRequest req;
  for (int64_t i = 0; i < ids; ++i) req.add_token_ids(65);
  pagoda::v1::DetokenizeResponse resp;
  grpc::ClientContext ctx;
  const Clock::time_point start = Clock::now();
  const grpc::Status s = stub->Detokenize(&ctx, req, &resp);
  return {absl::StrCat(s.error_code(), " ", s.error_message().substr(0, 90)),
          Seconds(Clock::now() - start)};
}

// The other client: 16-token streamed... completions one after another; records the
// slowest since the last Take().
class Bystander {
 public:
  explicit Bystander(const Target& t) : t_(t), thread_([this] { Run(); }) {}
  ~Bystander() {
    stop_ = true;
    thread_.join();
  }
  // The slowest completion since the last call (one still running counts its time so far),
  // and how many failed.
  std::pair<double, int> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    double worst = worst_;
    if (running_since_ != Clock::time_point()) {
      worst = std::max(worst, Seconds(Clock::now() - running_since_));
    }
    const int failed = failed_;
    worst_ = 0;
    failed_ = 0;
    return {worst, failed};
  }

 private:
  void Run() {
    const std::string body =
        json{{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}}.dump();
    while (!stop_) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_since_ = Clock::now();
      }
      const Outcome o = PostJson(t_, "/v1/completions", body);
      std::lock_guard<std::mutex> lock(mu_);
      running_since_ = Clock::time_point();
      worst_ = std::max(worst_, o.seconds);
      if (o.answer.rfind("200", 0) != 0) ++failed_;
    }
  }

  const Target t_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  double worst_ = 0;
  int failed_ = 0;
  Clock::time_point running_since_;
  std::thread thread_;
};

struct Payload {
  std::string finding;
  std::string what;
  std::function<Outcome(const Target&)> send;
};

json Completion(json extra) {
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 16}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

std::function<Outcome(const Target&)> Http(std::string path, json body) {
  return [path, text = body.dump()](const Target& t) { return PostJson(t, path, text); };
}

json Tools(int n, int properties) {
  json tools = json::array();
  for (int i = 0; i < n; ++i) {
    json props = json::object();
    for (int p = 0; p < properties; ++p) {
      props[absl::StrCat("p", p)] = {{"type", "string"}, {"maxLength", 2048}};
    }
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", absl::StrCat("f", i)},
                       {"parameters", {{"type", "object"}, {"properties", props}}}}}});
  }
  return tools;
}

std::vector<Payload> Payloads() {
  std::vector<Payload> out;
  std::string chain = "root ::= a0\n";
  for (int i = 0; i < 40; ++i)
    absl::StrAppend(&chain, "a", i, " ::= a", i + 1, " | a", i + 1, "\n");
  chain += "a40 ::= \"x\"\n";
  out.push_back({"1", "GBNF a_i ::= a_i+1 | a_i+1, 40 levels",
                 Http("/v1/completions", Completion({{"grammar", chain}}))});
  json defs = json::object();
  for (int i = 0; i < 30; ++i) {
    defs[absl::StrCat("d", i)] = {{"anyOf",
                                   {{{"$ref", absl::StrCat("#/$defs/d", i + 1)}},
                                    {{"$ref", absl::StrCat("#/$defs/d", i + 1)}}}}};
  }
  defs["d30"] = {{"type", "string"}};
  const auto schema = [](json s) {
    return Completion(
        {{"response_format",
          {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", s}}}}}});
  };
  out.push_back({"1", "$defs anyOf of identical $refs, 30 deep",
                 Http("/v1/completions", schema({{"$defs", defs}, {"$ref", "#/$defs/d0"}}))});
  out.push_back(
      {"1", "pattern ^((a?){0,7}){0,7}$",
       Http("/v1/completions", schema({{"type", "string"}, {"pattern", "^((a?){0,7}){0,7}$"}}))});
  std::string product = "root ::=";
  for (int i = 0; i < 32; ++i) product += " e";
  product += " \"x\"\ne ::= \"\" | \"\"\n";
  out.push_back({"2", "GBNF root ::= e x 32 \"x\", e ::= \"\" | \"\"",
                 Http("/v1/completions", Completion({{"grammar", product}}))});
  out.push_back({"3", "pattern of 20,000 nested groups (HTTP)",
                 Http("/v1/completions", schema({{"type", "string"},
                                                 {"pattern", std::string(20000, '(') + "a" +
                                                                 std::string(20000, ')')}}))});
  out.push_back({"3", "pattern of 50,000 nested groups (gRPC)", [](const Target& t) {
                   return GrpcGenerate(
                       t, json{{"type", "string"},
                               {"pattern", std::string(50000, '(') + "a" + std::string(50000, ')')}}
                              .dump());
                 }});
  for (int n : {4000, 20000}) {
    out.push_back(
        {"4", absl::StrCat("type [\"string\"] x ", n, ", maxLength 2048"),
         Http("/v1/completions", schema({{"type", json(std::vector<std::string>(n, "string"))},
                                         {"maxLength", 2048}}))});
  }
  out.push_back(
      {"4", "type of 7 distinct types, maxLength/maxItems 2048",
       Http("/v1/completions",
            schema({{"type", {"string", "array", "object", "number", "integer", "boolean", "null"}},
                    {"maxLength", 2048},
                    {"maxItems", 2048}}))});
  for (int n : {100, 200}) {
    json props = json::object();
    for (int i = 0; i < n; ++i)
      props[absl::StrCat("p", i)] = {{"type", "string"}, {"maxLength", 2048}};
    out.push_back({"4", absl::StrCat(n, " properties of maxLength 2048 (the size budget)"),
                   Http("/v1/completions", schema({{"type", "object"}, {"properties", props}}))});
  }
  const json turn = json::array({{{"role", "user"}, {"content", "hi"}}});
  for (int n : {8, 60}) {
    out.push_back({"5", absl::StrCat(n, " tools, 8 strings of maxLength 2048 each, required"),
                   Http("/v1/chat/completions", {{"messages", turn},
                                                 {"tools", Tools(n, 8)},
                                                 {"tool_choice", "required"},
                                                 {"max_tokens", 16}})});
  }
  {
    json props = json::object();
    for (int p = 0; p < 70000; ++p) props[absl::StrCat("p", p)] = json::object();
    json tools = json::array(
        {{{"type", "function"},
          {"function",
           {{"name", "big"}, {"parameters", {{"type", "object"}, {"properties", props}}}}}}});
    out.push_back(
        {"6", "a tool with 70,000 parameters (auto)",
         Http("/v1/chat/completions", {{"messages", turn}, {"tools", tools}, {"max_tokens", 16}})});
  }
  {
    std::string alts = "root ::= ";
    for (int i = 0; i < 4000; ++i) absl::StrAppend(&alts, i ? "|" : "", "\"k", i, "\"");
    out.push_back(
        {"7", "GBNF of 4,000 alternatives, n = 16",
         Http("/v1/completions", Completion({{"grammar", alts}, {"n", 16}, {"temperature", 1}}))});
    std::string stacks = "root ::= ";
    for (int i = 0; i < 2000; ++i) absl::StrAppend(&stacks, i ? "|" : "", "x", i, " [a-z]*");
    for (int i = 0; i < 2000; ++i) absl::StrAppend(&stacks, "\nx", i, " ::= [ -~]");
    out.push_back({"7", "GBNF of 2,000 distinct stacks, n = 16, 64 tokens",
                   Http("/v1/completions", {{"prompt", "Once upon a time"},
                                            {"grammar", stacks},
                                            {"max_tokens", 64},
                                            {"n", 16},
                                            {"temperature", 1}})});
    out.push_back({"7", "enum [0] x 100,000, n = 16", Http("/v1/completions", [&] {
                     json body = schema({{"enum", std::vector<int>(100000, 0)}});
                     body["n"] = 16;
                     body["temperature"] = 1;
                     return body;
                   }())});
  }
  out.push_back({"8", "gRPC json_schema of 16 MiB of '['",
                 [](const Target& t) { return GrpcGenerate(t, std::string(16 << 20, '[')); }});
  out.push_back({"8", "gRPC Detokenize of 12.6 M ids",
                 [](const Target& t) { return GrpcDetokenize(t, 12600000); }});
  {
    std::vector<std::string> values;
    for (int i = 0; i < 5000; ++i) values.push_back(absl::StrCat("value-", i));
    out.push_back(
        {"9", "enum of 5,000 strings", Http("/v1/completions", schema({{"enum", values}}))});
    out.push_back({"9", "an object whose property is an enum of 5,000 strings",
                   Http("/v1/completions", schema({{"type", "object"},
                                                   {"properties", {{"c", {{"enum", values}}}}},
                                                   {"required", {"c"}}}))});
  }
  out.push_back({"10", "n = 16, logprobs 20, 1,500 tokens, not streamed",
                 Http("/v1/completions", {{"prompt", "Once upon a time"},
                                          {"max_tokens", 1500},
                                          {"ignore_eos", true},
                                          {"n", 16},
                                          {"logprobs", 20}})});
  out.push_back({"10", "repetition_penalty 1e38 with an enum", Http("/v1/completions", [&] {
                   json body = schema({{"enum", {"cat", "dog"}}});
                   body["repetition_penalty"] = 1e38;
                   body["temperature"] = 0;
                   return body;
                 }())});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pagoda-hostile-check: issue 44's hostile requests against a running daemon"};
  std::string http = "127.0.0.1:8080", grpc_address = "127.0.0.1:50051";
  int pid = 0;
  std::string only;
  app.add_option("--http", http, "the daemon's --http-port address");
  app.add_option("--grpc", grpc_address, "the daemon's gRPC address");
  app.add_option("--pid", pid, "the daemon's process id (for its resident memory)");
  app.add_option("--only", only, "run only the payloads of this finding number");
  CLI11_PARSE(app, argc, argv);
  Target t;
  std::tie(t.http_host, t.http_port) = HostPort(http);
  t.grpc = grpc_address;
  t.pid = pid;
  const double rss0 = RssMib(pid);
  std::printf("daemon RSS at start: %.0f MiB\n", rss0);
  std::printf("%-3s | %-52s | %7s | %9s | %9s | %s\n", "#", "payload", "seconds", "other max",
              "RSS MiB", "answer");
  Bystander other(t);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  other.Take();
  double worst_other = 0, worst_payload = 0, max_rss = rss0;
  for (const Payload& p : Payloads()) {
    if (!only.empty() && p.finding != only) continue;
    const Outcome o = p.send(t);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // one more completion after
    const auto [slowest, failed] = other.Take();
    const double rss = RssMib(pid);
    worst_other = std::max(worst_other, slowest);
    worst_payload = std::max(worst_payload, o.seconds);
    max_rss = std::max(max_rss, rss);
    std::printf("%-3s | %-52s | %7.2f | %8.2fs | %9.0f | %s%s\n", p.finding.c_str(),
                p.what.substr(0, 52).c_str(), o.seconds, slowest, rss, o.answer.c_str(),
                failed > 0 ? absl::StrCat(" (other client: ", failed, " failed)").c_str() : "");
    std::fflush(stdout);
  }
  std::printf(
      "slowest payload: %.2f s; slowest other completion: %.2f s; RSS growth at most %.0f "
      "MiB\n",
      worst_payload, worst_other, max_rss - rss0);
  return 0;
}
