// pagoda-difftest: the differential tester's long mode, for soaks. Runs rounds of seeds
// --seed, --seed + 1, ... until --seconds have passed (or --rounds ran), prints a summary
// and every failure with its seed (rerun one with --seed N --rounds 1), and exits 1 on any.
// Flags through CLI11, as every pagoda binary (bench/bench_args.h): exit 2 on a bad one.
#include <cstdint>
#include <iostream>
#include <limits>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "bench/bench_args.h"
#include "tests/difftest.h"

int main(int argc, char** argv) {
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  CLI::App app("pagoda-difftest: every request of random mixed workloads against its alone run",
               "pagoda-difftest");
  pagoda::bench::SetUpApp(&app);
  uint64_t first_seed = 1;
  int64_t seconds = 60;
  int64_t rounds = 0;
  int32_t requests = 40;
  app.add_option("--seed", first_seed, "First round's seed.");
  app.add_option("--seconds", seconds, "Run rounds until this many seconds have passed.")
      ->check(CLI::Range(int64_t{1}, kMax64));
  app.add_option("--rounds", rounds, "Stop after this many rounds (0 = until --seconds).")
      ->check(CLI::Range(int64_t{0}, kMax64));
  app.add_option("--requests", requests, "Requests per round.")->check(CLI::Range(1, 1 << 20));
  if (auto rc = pagoda::bench::ParseCommandLine(&app, argc, argv)) return *rc;
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  pagoda::difftest::Report total;
  for (uint64_t seed = first_seed;; ++seed) {
    const pagoda::difftest::Report round =
        pagoda::difftest::RunRound(seed, {.requests_per_round = requests});
    for (const std::string& f : round.failures) std::cout << "FAIL " << f << "\n";
    total.Add(round);
    if (rounds > 0 && total.rounds >= rounds) break;
    if (absl::Now() >= end) break;
  }
  std::cout << total.Summary() << "\n";
  return total.failures.empty() ? 0 : 1;
}
