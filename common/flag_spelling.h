// absl flags are spelled with underscores; pagoda's binaries accept the dashed spelling too.
#pragma once

#include <string>

namespace pagoda {

// `--foo-bar=x-y` -> `--foo_bar=x-y`: dashes in a `--` flag's name (before any '=') become
// underscores; the value and anything not starting with `--` are returned unchanged.
inline std::string NormalizeFlagSpelling(const std::string& arg) {
  std::string s = arg;
  if (s.size() < 3 || s.compare(0, 2, "--") != 0) return s;
  const size_t end = s.find('=');
  for (size_t i = 2; i < s.size() && i < end; ++i) {
    if (s[i] == '-') s[i] = '_';
  }
  return s;
}

}  // namespace pagoda
