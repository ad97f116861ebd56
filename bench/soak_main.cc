// pagoda-soak: soak a running pagoda daemon (many streams with random cancels, deadlines,
// slow and stalled readers; RSS over time; every block free at the end), or measure a
// victim stream's latency under attack (--mode victim). See docs/BENCH.md.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "bench/bench_args.h"
#include "bench/soak.h"

ABSL_FLAG(std::string, mode, "soak", "soak or victim.");
ABSL_FLAG(std::string, server, "127.0.0.1:50051", "The daemon's gRPC address, host:port.");
ABSL_FLAG(std::string, metrics, "127.0.0.1:9090", "soak: host:port of the daemon's /metrics.");
ABSL_FLAG(int64_t, pid, 0, "soak: the daemon's pid, to print its RSS; 0 = not printed.");
ABSL_FLAG(int, streams, 1000, "soak: streams kept in flight.");
ABSL_FLAG(double, duration, 60, "soak: seconds during which new streams start.");
ABSL_FLAG(int, max_tokens, 64, "soak: each request asks for 1..max_tokens tokens.");
ABSL_FLAG(double, cancel_fraction, 0.1, "soak: streams the client cancels after 10-300 ms.");
ABSL_FLAG(double, deadline_fraction, 0.1, "soak: streams with a 20-500 ms deadline.");
ABSL_FLAG(double, slow_fraction, 0.1, "soak: streams that wait 5-50 ms between reads.");
ABSL_FLAG(double, stall_fraction, 0.02, "soak: streams that never read (3 s deadline).");
ABSL_FLAG(double, report_interval, 5, "soak: seconds between RSS/metrics lines.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the random choices.");
ABSL_FLAG(int, victim_tokens, 64, "victim: greedy tokens of the victim request.");
ABSL_FLAG(int, repeats, 5, "victim: victim requests alone, then as many under attack.");
ABSL_FLAG(int, attackers, 4, "victim: concurrent attacker streams.");
ABSL_FLAG(int, attack_tokens, 256, "victim: tokens each attacker generates.");
ABSL_FLAG(int, stop_strings, 16, "victim: stop strings per attacker request (the limit).");
ABSL_FLAG(int, stop_string_bytes, 256, "victim: bytes per stop string (the limit).");
ABSL_FLAG(std::string, victim_key, "", "victim: API key of the victim (its tenant); empty = none.");
ABSL_FLAG(std::string, attacker_key, "",
          "victim: API key of the attackers (their tenant); empty = none.");

int main(int argc, char** argv) {
  pagoda::bench::SetFlagsUsage(
      "bench/soak_main",
      "soaks a running pagoda daemon: pagoda-soak --server HOST:PORT --metrics HOST:PORT "
      "[--pid PID] [--streams N --duration S] | --mode victim. Flags may use dashes.");
  std::vector<std::string> args = pagoda::bench::PrepareArgs(argc, argv);
  if (!pagoda::bench::ParseFlags("pagoda-soak", args)) return 2;
  absl::Status status;
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "soak") {
    status = pagoda::bench::RunSoak({.server = absl::GetFlag(FLAGS_server),
                                     .metrics = absl::GetFlag(FLAGS_metrics),
                                     .pid = absl::GetFlag(FLAGS_pid),
                                     .streams = absl::GetFlag(FLAGS_streams),
                                     .duration_s = absl::GetFlag(FLAGS_duration),
                                     .max_tokens = absl::GetFlag(FLAGS_max_tokens),
                                     .cancel_fraction = absl::GetFlag(FLAGS_cancel_fraction),
                                     .deadline_fraction = absl::GetFlag(FLAGS_deadline_fraction),
                                     .slow_fraction = absl::GetFlag(FLAGS_slow_fraction),
                                     .stall_fraction = absl::GetFlag(FLAGS_stall_fraction),
                                     .report_interval_s = absl::GetFlag(FLAGS_report_interval),
                                     .seed = absl::GetFlag(FLAGS_seed)});
  } else if (mode == "victim") {
    status = pagoda::bench::RunVictim({.server = absl::GetFlag(FLAGS_server),
                                       .victim_tokens = absl::GetFlag(FLAGS_victim_tokens),
                                       .repeats = absl::GetFlag(FLAGS_repeats),
                                       .attackers = absl::GetFlag(FLAGS_attackers),
                                       .attack_tokens = absl::GetFlag(FLAGS_attack_tokens),
                                       .stop_strings = absl::GetFlag(FLAGS_stop_strings),
                                       .stop_string_bytes = absl::GetFlag(FLAGS_stop_string_bytes),
                                       .victim_key = absl::GetFlag(FLAGS_victim_key),
                                       .attacker_key = absl::GetFlag(FLAGS_attacker_key),
                                       .seed = absl::GetFlag(FLAGS_seed)});
  } else {
    std::fprintf(stderr, "pagoda-soak: --mode must be soak or victim\n");
    return 2;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "pagoda-soak: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
