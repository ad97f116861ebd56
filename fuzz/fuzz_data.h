// Shared set-up for the fuzz targets: where the test data is, loading it at fuzzer start.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "model/gguf.h"

namespace pagoda::fuzz {

// $PAGODA_TESTDATA_DIR/name when set, else the build's unpacked copy of tests/data.
inline std::string DataPath(const std::string& name) {
  const char* env = std::getenv("PAGODA_TESTDATA_DIR");
  const std::string dir = (env != nullptr && *env != '\0') ? env : PAGODA_FUZZ_TESTDATA_DIR;
  return dir + "/" + name;
}

// The parsed GGUF file at DataPath(name); aborts naming the file when it cannot be read,
// so a fuzzer never runs silently without its fixtures.
inline std::unique_ptr<gguf::GgufFile> OpenOrDie(const std::string& name) {
  auto file = gguf::GgufFile::Open(DataPath(name));
  if (!file.ok()) {
    std::fprintf(stderr, "fuzz: cannot open %s: %s\n", DataPath(name).c_str(),
                 std::string(file.status().message()).c_str());
    std::abort();
  }
  return *std::move(file);
}

// Aborts with `what` when `ok` is false: a broken invariant is a finding.
inline void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz: invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace pagoda::fuzz
