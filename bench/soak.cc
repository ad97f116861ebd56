#include "bench/soak.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/request_record.h"
#include "bench/soak_util.h"
#include "bench/stream_call.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"

namespace pagoda::bench {
namespace {

enum class Kind { kNormal, kCancel, kDeadline, kSlow, kStall };

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kNormal:
      return "normal";
    case Kind::kCancel:
      return "cancel";
    case Kind::kDeadline:
      return "deadline";
    case Kind::kSlow:
      return "slow-reader";
    case Kind::kStall:
      return "stalled-reader";
  }
  return "";
}

// Whether a stream of `kind` may end with gRPC code `code`. RESOURCE_EXHAUSTED is the
// daemon's queue limit or (stalled readers) its unsent-bytes limit.
bool Expected(Kind kind, const std::string& code) {
  if (code == "OK" || code == "RESOURCE_EXHAUSTED") return true;
  switch (kind) {
    case Kind::kNormal:
    case Kind::kSlow:
      return false;
    case Kind::kCancel:
      return code == "CANCELLED";
    case Kind::kDeadline:
    case Kind::kStall:
      return code == "DEADLINE_EXCEEDED";
  }
  return false;
}

// A stream whose reads (and cancel) may be delayed by the timer thread; holds keep it alive
// until those delayed operations ran.
class SoakCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  using Done = std::function<void(Kind, const grpc::Status&)>;
  // `u1`, `u2`: uniform draws in [0, 1) that place its deadline, cancel or read gap.
  SoakCall(Kind kind, v1::GenerateRequest request, Timers* timers, double u1, double u2, Done done)
      : kind_(kind), request_(std::move(request)), timers_(timers), done_(std::move(done)) {
    if (kind_ == Kind::kDeadline) SetDeadline(0.02 + 0.48 * u1);
    if (kind_ == Kind::kStall) SetDeadline(3);
    cancel_after_ = 0.01 + 0.29 * u1;
    read_gap_ = 0.005 + 0.045 * u2;
  }

  void Start(v1::Generation::Stub* stub) {
    stub->async()->Generate(&context_, &request_, this);
    if (kind_ == Kind::kCancel) {
      AddHold();
      timers_->After(cancel_after_, [this] {
        context_.TryCancel();
        RemoveHold();
      });
    }
    if (kind_ != Kind::kStall) StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (kind_ != Kind::kSlow) {
      StartRead(&response_);
      return;
    }
    AddHold();
    timers_->After(read_gap_, [this] {
      StartRead(&response_);
      RemoveHold();
    });
  }

  void OnDone(const grpc::Status& status) override {
    Done done = std::move(done_);
    const Kind kind = kind_;
    delete this;
    done(kind, status);
  }

 private:
  void SetDeadline(double seconds) {
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
  }

  const Kind kind_;
  v1::GenerateRequest request_;
  Timers* timers_;
  Done done_;
  double cancel_after_ = 0;
  double read_gap_ = 0;
  grpc::ClientContext context_;
  v1::GenerateResponse response_;
};

const char* const kPrompts[] = {"Once upon a time", "The little dog", "Lily and Tom went",
                                "One day, a bird", "The sun was hot and"};

class Soak {
 public:
  explicit Soak(const SoakOptions& options) : options_(options), rng_(options.seed) {
    for (int i = 0; i < 8; ++i) {  // several connections, not one HTTP/2 connection
      grpc::ChannelArguments args;
      args.SetInt("pagoda.soak.connection", i);
      stubs_.push_back(v1::Generation::NewStub(
          grpc::CreateCustomChannel(options.server, grpc::InsecureChannelCredentials(), args)));
    }
  }

  absl::Status Run();

 private:
  void StartOne() {
    std::unique_lock<std::mutex> lock(mu_);
    std::uniform_real_distribution<double> u(0, 1);
    const double x = u(rng_);
    const SoakOptions& o = options_;
    Kind kind = Kind::kNormal;
    double edge = o.cancel_fraction;
    if (x < edge) {
      kind = Kind::kCancel;
    } else if (x < (edge += o.deadline_fraction)) {
      kind = Kind::kDeadline;
    } else if (x < (edge += o.slow_fraction)) {
      kind = Kind::kSlow;
    } else if (x < (edge += o.stall_fraction)) {
      kind = Kind::kStall;
    }
    v1::GenerateRequest r;
    r.set_prompt(kPrompts[rng_() % std::size(kPrompts)]);
    r.set_max_tokens(1 + static_cast<int>(rng_() % static_cast<uint64_t>(o.max_tokens)));
    r.set_temperature(0.8f);
    r.set_seed(rng_());
    ++in_flight_;
    v1::Generation::Stub* stub = stubs_[++started_ % stubs_.size()].get();
    auto* call = new SoakCall(kind, std::move(r), &timers_, u(rng_), u(rng_),
                              [this](Kind k, const grpc::Status& s) { OnCallDone(k, s); });
    lock.unlock();  // a reaction may run before Start returns
    call->Start(stub);
  }

  void OnCallDone(Kind kind, const grpc::Status& status) {
    const std::string code = StatusCodeName(status.error_code());
    bool again;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.by_kind[KindName(kind)][code];
      if (!Expected(kind, code)) {
        ++counts_.unexpected;
        counts_.unexpected_samples.emplace(code, status.error_message());
      }
      --in_flight_;
      again = std::chrono::steady_clock::now() < end_;
      if (!again) cv_.notify_all();
    }
    if (again) StartOne();
  }

  void Report(double t);

  const SoakOptions options_;
  Timers timers_;
  std::vector<std::unique_ptr<v1::Generation::Stub>> stubs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point end_;
  int64_t in_flight_ = 0;
  int64_t started_ = 0;
  SoakCounts counts_;
};

void Soak::Report(double t) {
  const std::optional<int64_t> rss = ReadRssKb(options_.pid);
  const std::string metrics = FetchMetrics(options_.metrics);
  int64_t in_flight, started, unexpected;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight = in_flight_;
    started = started_;
    unexpected = counts_.unexpected;
  }
  std::printf(
      "t=%6.1fs rss=%s streams_in_flight=%lld started=%lld unexpected=%lld "
      "running=%g waiting=%g free_blocks=%g/%g\n",
      t, rss ? absl::StrCat(*rss / 1024, "MiB").c_str() : "-", static_cast<long long>(in_flight),
      static_cast<long long>(started), static_cast<long long>(unexpected),
      MetricValue(metrics, "pagoda:num_requests_running"),
      MetricValue(metrics, "pagoda:num_requests_waiting"),
      MetricValue(metrics, "pagoda:kv_cache_free_blocks"),
      MetricValue(metrics, "pagoda:kv_cache_total_blocks"));
  std::fflush(stdout);
}

absl::Status Soak::Run() {
  const auto start = std::chrono::steady_clock::now();
  end_ = start + std::chrono::microseconds(static_cast<int64_t>(options_.duration_s * 1e6));
  Report(0);
  for (int i = 0; i < options_.streams; ++i) StartOne();
  auto next_report = start;
  while (true) {
    next_report +=
        std::chrono::microseconds(static_cast<int64_t>(options_.report_interval_s * 1e6));
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, next_report,
                   [&] { return in_flight_ == 0 && std::chrono::steady_clock::now() >= end_; });
    const bool finished = in_flight_ == 0 && std::chrono::steady_clock::now() >= end_;
    lock.unlock();
    Report(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (finished) break;
  }
  // Every stream has ended: the daemon must give every block back.
  const bool pool_full = WaitPoolFull(options_.metrics, 30);
  Report(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::printf("\nstreams by kind and final status (%lld started):\n",
              static_cast<long long>(started_));
  for (const auto& [kind, codes] : counts_.by_kind) {
    std::printf("  %-15s", kind.c_str());
    for (const auto& [code, n] : codes)
      std::printf(" %s=%lld", code.c_str(), static_cast<long long>(n));
    std::printf("\n");
  }
  std::printf("unexpected: %lld\n", static_cast<long long>(counts_.unexpected));
  for (const auto& [code, message] : counts_.unexpected_samples) {
    std::printf("  %s: %s\n", code.c_str(), message.c_str());
  }
  std::printf("pool full at the end: %s\n", pool_full ? "yes" : "NO");
  if (counts_.unexpected > 0) {
    return absl::InternalError(absl::StrCat(counts_.unexpected, " unexpected statuses"));
  }
  if (!pool_full) return absl::InternalError("KV blocks still in use after every stream ended");
  return absl::OkStatus();
}

}  // namespace

absl::Status RunSoak(const SoakOptions& options) { return Soak(options).Run(); }

}  // namespace pagoda::bench
