// Helpers shared by tests: where the shared models live, temporary folders.
#pragma once

#include <string>

namespace pagoda::testing {

// The folder holding the test data (stories260K.gguf, its golden files, vocab/): the copy
// of tests/data that configuring unpacks into build/testdata, or $PAGODA_TESTDATA_DIR when
// set. Tests fail (never skip) when it is missing.
std::string ModelsDir();
// ModelsDir() + "/" + name.
std::string ModelPath(const std::string& name);
// Whole contents of a file; fails the current test when unreadable.
std::string ReadFileOrDie(const std::string& path);
// A fresh temporary directory, removed at process exit.
std::string MakeTempDir();
// The folder holding the built executables (build/bin).
std::string BinDir();

}  // namespace pagoda::testing
