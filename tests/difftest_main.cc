// pagoda-difftest: the differential tester's long mode, for soaks. Runs rounds of seeds
// --seed, --seed + 1, ... until --seconds have passed (or --rounds ran), prints a summary
// and every failure with its seed (rerun one with --seed N --rounds 1), and exits 1 on any.
#include <cstdint>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/clock.h"
#include "tests/difftest.h"

ABSL_FLAG(uint64_t, seed, 1, "first round's seed");
ABSL_FLAG(int64_t, seconds, 60, "run rounds until this many seconds have passed");
ABSL_FLAG(int64_t, rounds, 0, "stop after this many rounds (0 = until --seconds)");
ABSL_FLAG(int32_t, requests, 40, "requests per round");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "pagoda-difftest: every request of random mixed workloads against its alone run");
  absl::ParseCommandLine(argc, argv);
  const int32_t requests = absl::GetFlag(FLAGS_requests);
  if (requests <= 0 || absl::GetFlag(FLAGS_seconds) <= 0 || absl::GetFlag(FLAGS_rounds) < 0) {
    std::cerr << "pagoda-difftest: --requests and --seconds must be > 0, --rounds >= 0\n";
    return 2;
  }
  const absl::Time end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  pagoda::difftest::Report total;
  for (uint64_t seed = absl::GetFlag(FLAGS_seed);; ++seed) {
    const pagoda::difftest::Report round =
        pagoda::difftest::RunRound(seed, {.requests_per_round = requests});
    for (const std::string& f : round.failures) std::cout << "FAIL " << f << "\n";
    total.Add(round);
    if (absl::GetFlag(FLAGS_rounds) > 0 && total.rounds >= absl::GetFlag(FLAGS_rounds)) break;
    if (absl::Now() >= end) break;
  }
  std::cout << total.Summary() << "\n";
  return total.failures.empty() ? 0 : 1;
}
