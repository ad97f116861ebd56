// pagoda-soak: hold a running daemon under many concurrent streams with random cancels,
// deadlines, slow and stalled readers, and check it stays sound (docs/BENCH.md, "Soak").
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"

namespace pagoda::bench {

struct SoakOptions {
  std::string server = "127.0.0.1:50051";  // gRPC host:port
  std::string metrics = "127.0.0.1:9090";  // host:port of /metrics
  int64_t pid = 0;                         // the daemon's pid, for its RSS; 0 = none
  int streams = 1000;                      // streams kept in flight
  double duration_s = 60;                  // start no stream after this
  int max_tokens = 64;                     // each request asks for 1..max_tokens
  double cancel_fraction = 0.1;            // cancelled by the client after 10-300 ms
  double deadline_fraction = 0.1;          // a deadline of 20-500 ms
  double slow_fraction = 0.1;              // 5-50 ms between reads
  double stall_fraction = 0.02;            // never read; a 3 s deadline ends them
  double report_interval_s = 5;
  uint64_t seed = 1;
};

// What each kind of stream ended with, by gRPC status code name.
struct SoakCounts {
  std::map<std::string, std::map<std::string, int64_t>> by_kind;
  int64_t unexpected = 0;                                 // statuses its kind does not explain
  std::map<std::string, std::string> unexpected_samples;  // code -> first message
};

// Runs the soak against `options.server`, printing RSS and counts every report interval,
// then the totals and whether every KV block is free once the streams are done. Ok when
// nothing unexpected happened and the pool is full; otherwise an error saying what.
absl::Status RunSoak(const SoakOptions& options);

struct VictimOptions {
  std::string server = "127.0.0.1:50051";
  int victim_tokens = 64;       // the victim: greedy, this many tokens, ignore_eos
  int repeats = 5;              // victim requests measured alone, then under attack
  int attackers = 4;            // streams sending the worst request the limits allow
  int attack_tokens = 256;      // max_tokens of each attacker request
  int stop_strings = 16;        // the daemon's --max-stop-strings
  int stop_string_bytes = 256;  // the daemon's --max-stop-string-bytes
  // API keys (sent as `authorization: Bearer KEY`) of the victim and the attackers; with a
  // --tenants file they are two tenants. Empty = none sent.
  std::string victim_key;
  std::string attacker_key;
  uint64_t seed = 1;
};

// Measures the victim's latency alone, then while attackers send requests with the longest
// prompt the context allows, `stop_strings` stop strings of `stop_string_bytes`, 20
// logprobs and ignore_eos, and prints both with their ratio.
absl::Status RunVictim(const VictimOptions& options);

}  // namespace pagoda::bench
