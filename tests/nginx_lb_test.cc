// Acceptance test of deploy/nginx-grpc.conf: Debian's nginx on loopback in front of two
// `pagoda serve` replicas (built-in model, the same two-tenant --tenants file), driven by
// pagoda-bench with both tenants. Every request succeeds and both replicas serve; then one
// replica gets SIGTERM mid-run: its streams finish, new ones go to the other replica, and
// no request fails. Skipped when nginx is not installed. Counts only, never timing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_process.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

// The tenants' keys and their SHA-256 digests (printf KEY | sha256sum).
constexpr char kKeyA[] = "tenant-a-secret";
constexpr char kDigestA[] = "9a12a5d055129f6bda2e9ef5e898194500ca5115d6f26ec024e9518e36c2ae0f";
constexpr char kKeyB[] = "tenant-b-secret";
constexpr char kDigestB[] = "3767e6cdb6757a6683fc1e8b9d513fef132a01346372c19b8077ba6d9c1321c6";

// The nginx binary: $PAGODA_NGINX when set, else nginx on PATH or in /usr/sbin; "" when
// there is no executable one.
std::string FindNginx() {
  if (const char* env = std::getenv("PAGODA_NGINX"); env != nullptr && *env != '\0') {
    return access(env, X_OK) == 0 ? env : "";
  }
  const char* path = std::getenv("PATH");
  std::vector<std::string> dirs =
      absl::StrSplit(path != nullptr ? path : "", ':', absl::SkipEmpty());
  dirs.push_back("/usr/sbin");
  for (const std::string& dir : dirs) {
    const std::string nginx = dir + "/nginx";
    if (access(nginx.c_str(), X_OK) == 0) return nginx;
  }
  return "";
}

// A TCP port nobody listens on now (the kernel's pick for an ephemeral bind).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

bool Accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// deploy/nginx-grpc.conf with the addresses of its "# replica" lines replaced by
// `replicas` (in order) and the port of its "# listen" line by 127.0.0.1:`port`. Fails the
// test when the markers do not match.
std::string RenderConfig(const std::string& source, const std::vector<std::string>& replicas,
                         int port) {
  std::string out;
  size_t replica = 0;
  int listens = 0;
  for (absl::string_view view : absl::StrSplit(source, '\n')) {
    std::string line(view);
    if (absl::EndsWith(line, "# replica")) {
      EXPECT_LT(replica, replicas.size()) << "more '# replica' lines than replicas";
      if (replica >= replicas.size()) continue;
      line = absl::StrReplaceAll(
          line, {{"10.0.0.1" + std::to_string(replica + 1) + ":50051", replicas[replica]}});
      EXPECT_TRUE(absl::StrContains(line, replicas[replica])) << line;
      ++replica;
    } else if (absl::EndsWith(line, "# listen")) {
      line = absl::StrReplaceAll(line, {{"listen 8080", absl::StrCat("listen 127.0.0.1:", port)}});
      EXPECT_TRUE(absl::StrContains(line, absl::StrCat(port))) << line;
      ++listens;
    }
    absl::StrAppend(&out, line, "\n");
  }
  EXPECT_EQ(replica, replicas.size());
  EXPECT_EQ(listens, 1);
  return out;
}

// The sum of every sample of metric `name` (any labels) in a Prometheus exposition; -1 when
// there is none.
double SumMetric(const std::string& exposition, const std::string& name) {
  double sum = -1;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, name)) continue;
    const absl::string_view rest = line.substr(name.size());
    if (rest.empty() || (rest[0] != ' ' && rest[0] != '{')) continue;
    double v;
    if (!absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) continue;
    sum = (sum < 0 ? 0 : sum) + v;
  }
  return sum;
}

double ReplicaMetric(const testing::DaemonProcess& d, const std::string& name) {
  return SumMetric(testing::HttpGet(d.metrics_port(), "/metrics"), name);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// nginx in the foreground with its own prefix, temp, pid and log paths under `dir`.
class NginxProcess {
 public:
  bool Start(const std::string& nginx, const std::string& dir, const std::string& site) {
    dir_ = dir;
    WriteFile(dir + "/pagoda.conf", site);
    std::string user;
    if (geteuid() == 0) {  // workers would otherwise drop to nobody and lose the temp dir
      const passwd* pw = getpwuid(0);
      user = absl::StrCat("user ", pw != nullptr ? pw->pw_name : "root", ";\n");
    }
    WriteFile(dir + "/nginx.conf",
              absl::StrCat(user, "daemon off;\nworker_processes 2;\npid ", dir,
                           "/nginx.pid;\nerror_log ", dir, "/error.log info;\n",
                           "events { worker_connections 1024; }\nhttp {\n  access_log ", dir,
                           "/access.log;\n  client_body_temp_path ", dir, "/body;\n",
                           "  proxy_temp_path ", dir, "/proxy;\n  fastcgi_temp_path ", dir,
                           "/fastcgi;\n  uwsgi_temp_path ", dir, "/uwsgi;\n  scgi_temp_path ", dir,
                           "/scgi;\n  include ", dir, "/pagoda.conf;\n}\n"));
    pid_ = testing::SpawnProcess(
        {nginx, "-p", dir + "/", "-e", dir + "/error.log", "-c", dir + "/nginx.conf"},
        dir + "/nginx.out", dir + "/nginx.out");
    return pid_ > 0;
  }
  ~NginxProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      testing::WaitForExit(pid_);
    }
  }
  std::string ErrorLog() const {
    std::ifstream in(dir_ + "/error.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
};

struct BenchRun {
  int exit_code = -1;
  nlohmann::json json;
  std::string stderr_text;
};

class NginxLbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nginx_ = FindNginx();
    if (nginx_.empty()) {
      GTEST_SKIP() << "nginx is not installed (scripts/install-deps.sh installs it; "
                      "PAGODA_NGINX=PATH names another binary)";
    }
    dir_ = testing::MakeTempDir();
    const std::string tenants = dir_ + "/tenants.json";
    WriteFile(tenants, absl::StrCat(R"({"tenants": [{"name": "a", "api_key_sha256": [")", kDigestA,
                                    R"("], "weight": 1}, {"name": "b", )",
                                    R"("api_key_sha256": [")", kDigestB, R"("], "weight": 1}]})"));
    for (testing::DaemonProcess& r : replicas_) {
      ASSERT_TRUE(r.Start({"--tenants", tenants, "--drain-timeout", "3600s"}));
    }
    port_ = FreePort();
    ASSERT_GT(port_, 0);
    const std::string source = testing::ReadFileOrDie(PAGODA_NGINX_CONF);
    ASSERT_TRUE(proxy_.Start(
        nginx_, dir_,
        RenderConfig(source, {replicas_[0].address(), replicas_[1].address()}, port_)));
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!Accepts(port_) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
    ASSERT_TRUE(Accepts(port_)) << proxy_.ErrorLog();
  }

  // Starts pagoda-bench through nginx with both tenants, `per_tenant` requests each of
  // `output_len` tokens, at most `concurrency` in flight per tenant; `name` keeps its files
  // apart from a concurrent run's.
  pid_t StartBench(const std::string& name, int per_tenant, int output_len, int concurrency) {
    const std::string n = absl::StrCat(per_tenant), c = absl::StrCat(concurrency);
    return testing::SpawnProcess(
        {testing::BinDir() + "/pagoda-bench", "--server", absl::StrCat("127.0.0.1:", port_),
         "--input-len", "16", "--output-len", absl::StrCat(output_len), "--ignore-eos",
         "--progress=false", "--json-out", dir_ + "/" + name + ".json", "--tenant",
         absl::StrCat("name=a,key=", kKeyA, ",concurrency=", c, ",num-prompts=", n), "--tenant",
         absl::StrCat("name=b,key=", kKeyB, ",concurrency=", c, ",num-prompts=", n)},
        dir_ + "/" + name + ".out", dir_ + "/" + name + ".err");
  }

  BenchRun FinishBench(const std::string& name, pid_t pid) {
    BenchRun run;
    run.exit_code = testing::WaitForExit(pid);
    run.stderr_text = testing::ReadFileOrDie(dir_ + "/" + name + ".err");
    if (std::filesystem::exists(dir_ + "/" + name + ".json")) {
      run.json = nlohmann::json::parse(testing::ReadFileOrDie(dir_ + "/" + name + ".json"));
    }
    return run;
  }

  // Every request of a run with `per_tenant` requests per tenant succeeded.
  void ExpectAllSucceeded(const BenchRun& run, int per_tenant) {
    ASSERT_EQ(run.exit_code, 0) << run.stderr_text << proxy_.ErrorLog();
    EXPECT_EQ(run.json["failed"], 0) << run.json["error_samples"] << "\nnginx:\n"
                                     << proxy_.ErrorLog();
    EXPECT_EQ(run.json["completed"], 2 * per_tenant);
    ASSERT_EQ(run.json["tenants"].size(), 2u);
    for (const auto& t : run.json["tenants"]) {
      EXPECT_EQ(t["completed"], per_tenant) << t["name"];
      EXPECT_EQ(t["failed"], 0) << t["name"];
    }
  }

  // Requests the replicas hold (running or waiting), summed over both.
  double RequestsHeld() {
    double held = 0;
    for (const testing::DaemonProcess& r : replicas_) {
      held += std::max(0.0, ReplicaMetric(r, "pagoda:num_requests_running")) +
              std::max(0.0, ReplicaMetric(r, "pagoda:num_requests_waiting"));
    }
    return held;
  }

  std::string nginx_;
  std::string dir_;
  int port_ = 0;
  testing::DaemonProcess replicas_[2];
  NginxProcess proxy_;  // destroyed before the replicas
};

TEST_F(NginxLbTest, BothTenantsSucceedAndBothReplicasServe) {
  constexpr int kPerTenant = 24;
  const BenchRun run = FinishBench("run", StartBench("run", kPerTenant, 8, 4));
  ExpectAllSucceeded(run, kPerTenant);
  const double served0 = ReplicaMetric(replicas_[0], "pagoda:request_success_total");
  const double served1 = ReplicaMetric(replicas_[1], "pagoda:request_success_total");
  EXPECT_GT(served0, 0);
  EXPECT_GT(served1, 0);
  EXPECT_EQ(served0 + served1, 2 * kPerTenant);
}

// nginx writes a gRPC request to a replica unbuffered and never resends it once written,
// so a replica can only hand new work to the other one by refusing the connection. The
// run is ordered so that no request is being written to the replica as it stops
// listening: the long streams are all in flight when it gets SIGTERM, and the new
// requests start once it refuses connections.
TEST_F(NginxLbTest, SigtermedReplicaFinishesItsStreamsAndNewOnesGoToTheOther) {
  constexpr int kLongPerTenant = 8, kNewPerTenant = 6;
  const pid_t long_run = StartBench("long", kLongPerTenant, 1000, kLongPerTenant);
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (RequestsHeld() < 2 * kLongPerTenant && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  const double held0 = ReplicaMetric(replicas_[0], "pagoda:num_requests_running") +
                       ReplicaMetric(replicas_[0], "pagoda:num_requests_waiting");
  ASSERT_GT(held0, 0) << "replica 0 holds none of the streams";
  replicas_[0].Signal(SIGTERM);
  while (Accepts(replicas_[0].port()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_FALSE(Accepts(replicas_[0].port()));
  // It stopped listening while its streams still run (they are 1000 tokens long).
  ASSERT_EQ(testing::HttpGet(replicas_[0].metrics_port(), "/health"), "NOT_SERVING\n");
  const double other_before = ReplicaMetric(replicas_[1], "pagoda:request_success_total");
  const BenchRun fresh = FinishBench("new", StartBench("new", kNewPerTenant, 8, 2));
  ExpectAllSucceeded(fresh, kNewPerTenant);
  // Every new request went to replica 1.
  EXPECT_GE(ReplicaMetric(replicas_[1], "pagoda:request_success_total") - other_before,
            2 * kNewPerTenant);
  const BenchRun drained = FinishBench("long", long_run);
  ExpectAllSucceeded(drained, kLongPerTenant);
  EXPECT_EQ(drained.json["total_output_tokens"], 2 * kLongPerTenant * 1000);
  EXPECT_EQ(replicas_[0].Wait(), 0) << replicas_[0].Log();
  EXPECT_TRUE(absl::StrContains(replicas_[0].Log(), "stopped (0 streams cut off)"))
      << replicas_[0].Log();
}

}  // namespace
}  // namespace pagoda
