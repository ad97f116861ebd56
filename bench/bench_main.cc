// pagoda-bench: a load-test client for a pagoda daemon, with vLLM benchmark_serving's
// metrics. `pagoda-bench --server HOST:PORT [flags]`; see docs/BENCH.md.
#include "CLI/CLI.hpp"
#include "bench/bench_app.h"
#include "bench/bench_args.h"
#include "bench/bench_flags.h"

int main(int argc, char** argv) {
  CLI::App app(
      "load-tests a pagoda daemon: pagoda-bench --server HOST:PORT [--concurrency N | "
      "--request-rate R] [flags]. Flags may be spelled with dashes or underscores.",
      "pagoda-bench");
  pagoda::bench::SetUpApp(&app);
  pagoda::bench::BenchConfig config;
  pagoda::bench::AddBenchFlags(&app, &config);
  if (auto rc = pagoda::bench::ParseCommandLine(&app, argc, argv)) return *rc;
  return pagoda::bench::RunBench(config);
}
