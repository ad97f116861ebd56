// Deliberate bugs the engine can be built to make, for tests only: the differential tester
// (tests/difftest.h) must catch each one, which shows it would catch the real thing.
// Production never sets one (EngineConfig::injected_fault defaults to kNone).
#pragma once

#include <cstdint>

namespace pagoda::engine {

enum class InjectedFault : int8_t {
  kNone,
  kSkipCopies,       // the step's block copies (copy on write, swap out, swap in) never run
  kReuseBlockEarly,  // a sample writes into a block its sibling still reads (no copy on write)
  kDropChunk,        // the K/V of a batch's last chunk are never stored (batches of 2+ chunks)
};

}  // namespace pagoda::engine
