// pagoda-soak: soak a running pagoda daemon (many streams with random cancels, deadlines,
// slow and stalled readers; RSS over time; every block free at the end), or measure a
// victim stream's latency under attack (--mode victim). See docs/BENCH.md.
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "bench/bench_args.h"
#include "bench/soak.h"

namespace {

using pagoda::bench::SoakOptions;
using pagoda::bench::VictimOptions;

// The flags of --mode soak; defaults are SoakOptions'.
void AddSoakFlags(CLI::App* app, SoakOptions* o) {
  app->add_option("--metrics", o->metrics, "soak: host:port of the daemon's /metrics.");
  app->add_option("--pid", o->pid, "soak: the daemon's pid, to print its RSS; 0 = not printed.");
  app->add_option("--streams", o->streams, "soak: streams kept in flight.");
  app->add_option("--duration", o->duration_s, "soak: seconds during which new streams start.");
  app->add_option("--max-tokens", o->max_tokens,
                  "soak: each request asks for 1..max_tokens tokens.");
  app->add_option("--cancel-fraction", o->cancel_fraction,
                  "soak: streams the client cancels after 10-300 ms.");
  app->add_option("--deadline-fraction", o->deadline_fraction,
                  "soak: streams with a 20-500 ms deadline.");
  app->add_option("--slow-fraction", o->slow_fraction,
                  "soak: streams that wait 5-50 ms between reads.");
  app->add_option("--stall-fraction", o->stall_fraction,
                  "soak: streams that never read (3 s deadline).");
  app->add_option("--report-interval", o->report_interval_s,
                  "soak: seconds between RSS/metrics lines.");
}

// The flags of --mode victim; defaults are VictimOptions' (the daemon's default limits).
void AddVictimFlags(CLI::App* app, VictimOptions* o) {
  app->add_option("--victim-tokens", o->victim_tokens,
                  "victim: greedy tokens of the victim request.");
  app->add_option("--repeats", o->repeats,
                  "victim: victim requests alone, then as many under attack.");
  app->add_option("--attackers", o->attackers, "victim: concurrent attacker streams.");
  app->add_option("--attack-tokens", o->attack_tokens, "victim: tokens each attacker generates.");
  app->add_option("--stop-strings", o->stop_strings,
                  "victim: stop strings per attacker request (the daemon's --max-stop-strings).");
  app->add_option("--stop-string-bytes", o->stop_string_bytes,
                  "victim: bytes per stop string (the daemon's --max-stop-string-bytes).");
  app->add_option("--victim-key", o->victim_key,
                  "victim: API key of the victim (its tenant); empty = none.");
  app->add_option("--attacker-key", o->attacker_key,
                  "victim: API key of the attackers (their tenant); empty = none.");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "soaks a running pagoda daemon: pagoda-soak --server HOST:PORT --metrics HOST:PORT "
      "[--pid PID] [--streams N --duration S] | --mode victim. Flags may be spelled with "
      "dashes or underscores.",
      "pagoda-soak");
  pagoda::bench::SetUpApp(&app);
  SoakOptions soak;
  VictimOptions victim;
  std::string mode = "soak";
  app.add_option("--mode", mode, "soak or victim.")->check(CLI::IsMember({"soak", "victim"}));
  // Both modes' --server and --seed (SoakOptions' defaults equal VictimOptions').
  app.add_option("--server", soak.server, "The daemon's gRPC address, host:port.");
  app.add_option("--seed", soak.seed, "Seed of the random choices.");
  AddSoakFlags(&app, &soak);
  AddVictimFlags(&app, &victim);
  if (auto rc = pagoda::bench::ParseCommandLine(&app, argc, argv)) return *rc;
  victim.server = soak.server;
  victim.seed = soak.seed;
  const absl::Status status =
      mode == "victim" ? pagoda::bench::RunVictim(victim) : pagoda::bench::RunSoak(soak);
  if (!status.ok()) {
    std::fprintf(stderr, "pagoda-soak: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
