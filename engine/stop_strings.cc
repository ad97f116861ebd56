#include "engine/stop_strings.h"

#include <algorithm>
#include <cstdint>

namespace pagoda::engine {
namespace {

// Length of the longest suffix of `text` that is a proper prefix of `stop`, by the
// Knuth-Morris-Pratt automaton of `stop` run over the last |stop| - 1 bytes of `text`:
// O(|stop|) per call, whatever the bytes (a naive scan is O(|stop|^2) on repetitive text).
size_t LongestPendingPrefix(std::string_view text, std::string_view stop) {
  const size_t m = stop.size();
  if (m < 2 || text.empty()) return 0;
  thread_local std::vector<uint32_t> fail;  // fail[i]: border of stop[0, i + 1)
  fail.assign(m, 0);
  for (size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && stop[i] != stop[k]) k = fail[k - 1];
    if (stop[i] == stop[k]) ++k;
    fail[i] = static_cast<uint32_t>(k);
  }
  // The tail is shorter than `stop`, so the automaton never reaches a full match.
  const std::string_view tail = text.substr(text.size() - std::min(text.size(), m - 1));
  size_t k = 0;
  for (char c : tail) {
    while (k > 0 && stop[k] != c) k = fail[k - 1];
    if (stop[k] == c) ++k;
  }
  return k;
}

}  // namespace

size_t FindStop(const std::string& text, size_t old_size, const std::vector<std::string>& stops) {
  size_t best = std::string::npos;
  for (const std::string& s : stops) {
    const size_t from = old_size >= s.size() ? old_size - s.size() + 1 : 0;
    const size_t pos = text.find(s, from);
    if (pos != std::string::npos && pos < best) best = pos;
  }
  return best;
}

size_t HeldBack(std::string_view text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops) hold = std::max(hold, LongestPendingPrefix(text, s));
  return hold;
}

}  // namespace pagoda::engine
