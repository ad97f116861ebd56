#include "tests/test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"

namespace pagoda::testing {
namespace {

std::vector<std::string>& TempDirs() {
  static auto* dirs = new std::vector<std::string>();
  return *dirs;
}

void RemoveTempDirs() {
  for (const auto& d : TempDirs()) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
}

}  // namespace

std::string ModelsDir() {
  const char* env = std::getenv("PAGODA_TESTDATA_DIR");
  std::string dir = (env != nullptr && *env != '\0') ? env : PAGODA_DEFAULT_TESTDATA_DIR;
  if (!std::filesystem::exists(dir + "/stories260K.gguf")) {
    ADD_FAILURE() << "models folder " << dir
                  << " has no stories260K.gguf (tests/data is unpacked into build/testdata at "
                     "configure time)";
  }
  return dir;
}

std::string ModelPath(const std::string& name) { return ModelsDir() + "/" + name; }

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string MakeTempDir() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(RemoveTempDirs); });
  std::string templ = (std::filesystem::temp_directory_path() / "pagoda-test-XXXXXX").string();
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  char* dir = mkdtemp(buf.data());
  if (dir == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return "/tmp";
  }
  TempDirs().push_back(dir);
  return dir;
}

std::string BinDir() {
  const char* env = std::getenv("PAGODA_BIN_DIR");
  return env != nullptr ? env : "bin";
}

}  // namespace pagoda::testing
