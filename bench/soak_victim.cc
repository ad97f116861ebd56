// pagoda-soak --mode victim: one victim stream's latency alone and while attackers send the
// worst requests the daemon's limits still accept.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bench/request_record.h"
#include "bench/soak.h"
#include "bench/stream_call.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"

namespace pagoda::bench {
namespace {

struct Latency {
  double ttft_ms = 0;
  double e2e_ms = 0;
};

absl::StatusOr<Latency> RunVictimOnce(v1::Generation::Stub* stub, int tokens,
                                      const std::string& key) {
  v1::GenerateRequest r;
  r.set_prompt("Once upon a time");
  r.set_max_tokens(tokens);
  r.set_temperature(0);
  r.set_ignore_eos(true);
  grpc::ClientContext context;
  AddApiKey(&context, key);
  const double start = NowSeconds();
  auto reader = stub->Generate(&context, r);
  v1::GenerateResponse response;
  Latency l;
  int got = 0;
  while (reader->Read(&response)) {
    if (got == 0 && response.token_ids_size() > 0) l.ttft_ms = (NowSeconds() - start) * 1e3;
    got += response.token_ids_size();
  }
  const grpc::Status status = reader->Finish();
  l.e2e_ms = (NowSeconds() - start) * 1e3;
  if (!status.ok() || got != tokens) {
    return absl::InternalError(absl::StrCat("victim: ", StatusCodeName(status.error_code()), " ",
                                            status.error_message(), " after ", got, " tokens"));
  }
  return l;
}

// The worst request the limits allow: the longest prompt the context leaves room for,
// every stop string at its longest, 20 logprobs, no early end.
v1::GenerateRequest WorstRequest(const VictimOptions& o, const v1::ModelInfo& info,
                                 std::mt19937_64& rng) {
  v1::GenerateRequest r;
  const int prompt_len = std::max(1, info.context_length() - o.attack_tokens - 1);
  for (int i = 0; i < prompt_len; ++i) {
    r.add_prompt_token_ids(3 + static_cast<int32_t>(rng() % (info.vocab_size() - 3)));
  }
  r.set_max_tokens(info.context_length() - prompt_len);
  r.set_temperature(1);
  r.set_ignore_eos(true);
  r.set_logprobs(20);
  for (int s = 0; s < o.stop_strings; ++s) {
    std::string stop(o.stop_string_bytes, 'a');
    for (char& c : stop) c = static_cast<char>('a' + rng() % 26);
    r.add_stop(stop);
  }
  return r;
}

// `options.attackers` threads, each on its own connection, sending WorstRequest in a loop
// until Stop (which cancels the calls in flight).
class Attackers {
 public:
  Attackers(const VictimOptions& options, const v1::ModelInfo& info) {
    for (int a = 0; a < options.attackers; ++a) {
      threads_.emplace_back([this, options, info, a] { Loop(options, info, a); });
    }
  }
  ~Attackers() { Stop(); }

  void Stop() {
    stop_ = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (grpc::ClientContext* c : live_) c->TryCancel();
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  int tokens() const { return tokens_; }
  int errors() const { return errors_; }

 private:
  void Loop(const VictimOptions& o, const v1::ModelInfo& info, int a) {
    grpc::ChannelArguments args;
    args.SetInt("pagoda.soak.attacker", a);
    auto stub = v1::Generation::NewStub(
        grpc::CreateCustomChannel(o.server, grpc::InsecureChannelCredentials(), args));
    std::mt19937_64 rng(o.seed + a);
    while (!stop_) {
      grpc::ClientContext context;
      AddApiKey(&context, o.attacker_key);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        live_.push_back(&context);
      }
      auto reader = stub->Generate(&context, WorstRequest(o, info, rng));
      v1::GenerateResponse response;
      while (reader->Read(&response)) tokens_ += response.token_ids_size();
      const grpc::Status s = reader->Finish();
      if (!s.ok() && !stop_) {
        ++errors_;
        std::fprintf(stderr, "attacker: %s %s\n", StatusCodeName(s.error_code()).c_str(),
                     s.error_message().c_str());
      }
      std::lock_guard<std::mutex> lock(mu_);
      live_.erase(std::find(live_.begin(), live_.end(), &context));
    }
  }

  std::atomic<bool> stop_{false};
  std::atomic<int> tokens_{0};
  std::atomic<int> errors_{0};
  std::mutex mu_;
  std::vector<grpc::ClientContext*> live_;  // calls in flight, to cancel
  std::vector<std::thread> threads_;
};

struct Summary2 {
  double p50_ttft = 0, max_ttft = 0, p50_e2e = 0, max_e2e = 0;
};

Summary2 Summarize(std::vector<Latency> ls) {
  Summary2 s;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  };
  std::vector<double> ttft, e2e;
  for (const Latency& l : ls) {
    ttft.push_back(l.ttft_ms);
    e2e.push_back(l.e2e_ms);
  }
  s.p50_ttft = median(ttft);
  s.p50_e2e = median(e2e);
  s.max_ttft = ttft.empty() ? 0 : *std::max_element(ttft.begin(), ttft.end());
  s.max_e2e = e2e.empty() ? 0 : *std::max_element(e2e.begin(), e2e.end());
  return s;
}

void Print(const char* label, const Summary2& s) {
  std::printf("%-14s ttft p50 %8.1f ms max %8.1f ms | e2e p50 %8.1f ms max %8.1f ms\n", label,
              s.p50_ttft, s.max_ttft, s.p50_e2e, s.max_e2e);
}

}  // namespace

absl::Status RunVictim(const VictimOptions& o) {
  auto channel = grpc::CreateChannel(o.server, grpc::InsecureChannelCredentials());
  auto stub = v1::Generation::NewStub(channel);
  v1::ModelInfo info;
  {
    grpc::ClientContext context;
    AddApiKey(&context, o.victim_key);
    const grpc::Status s = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    if (!s.ok()) return absl::UnavailableError(absl::StrCat("GetModelInfo: ", s.error_message()));
  }
  std::vector<Latency> alone, attacked;
  for (int i = 0; i < o.repeats; ++i) {
    absl::StatusOr<Latency> l = RunVictimOnce(stub.get(), o.victim_tokens, o.victim_key);
    if (!l.ok()) return l.status();
    alone.push_back(*l);
  }
  Attackers attackers(o, info);
  // Measure once every attacker is generating.
  while (attackers.tokens() < o.attackers && attackers.errors() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int i = 0; i < o.repeats; ++i) {
    absl::StatusOr<Latency> l = RunVictimOnce(stub.get(), o.victim_tokens, o.victim_key);
    if (!l.ok()) break;
    attacked.push_back(*l);
  }
  attackers.Stop();
  const Summary2 a = Summarize(alone), b = Summarize(attacked);
  std::printf(
      "victim: %d greedy tokens, %d runs each; %d attackers: %d-token prompts, %d x "
      "%d-byte stop strings, 20 logprobs, ignore_eos\n",
      o.victim_tokens, o.repeats, o.attackers,
      std::max(1, info.context_length() - o.attack_tokens - 1), o.stop_strings,
      o.stop_string_bytes);
  Print("alone", a);
  Print("under attack", b);
  if (a.p50_e2e > 0) std::printf("e2e p50 ratio: %.2fx\n", b.p50_e2e / a.p50_e2e);
  if (attacked.size() != alone.size()) return absl::InternalError("a victim request failed");
  if (attackers.errors() > 0) {
    return absl::InternalError(absl::StrCat(attackers.errors(), " attacker requests failed"));
  }
  return absl::OkStatus();
}

}  // namespace pagoda::bench
