// pagoda-bench's flags, declared once (CLI11) so that tests parse a command line exactly as
// the binary does.
#pragma once

#include "CLI/CLI.hpp"
#include "bench/bench_app.h"

namespace pagoda::bench {

// Declares every pagoda-bench flag on `app` (after SetUpApp), writing into `config`.
void AddBenchFlags(CLI::App* app, BenchConfig* config);

}  // namespace pagoda::bench
