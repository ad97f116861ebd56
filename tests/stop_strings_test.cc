// Stop-string matching: the held-back length equals a brute-force scan on every text and
// stop over a small alphabet, and the earliest stop wins.
#include "engine/stop_strings.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagoda::engine {
namespace {

size_t BruteHeldBack(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops) {
    for (size_t k = 1; k < s.size() && k <= text.size(); ++k) {
      if (text.compare(text.size() - k, k, s, 0, k) == 0) hold = std::max(hold, k);
    }
  }
  return hold;
}

// Every string over {a, b} of length < n, in order.
std::vector<std::string> AllStrings(int n) {
  std::vector<std::string> out = {""};
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int>(out[i].size()) + 1 < n) {
      out.push_back(out[i] + 'a');
      out.push_back(out[i] + 'b');
    }
  }
  return out;
}

TEST(StopStringsTest, HeldBackEqualsBruteForceOnEveryShortText) {
  const std::vector<std::string> strings = AllStrings(8);
  for (const std::string& stop : strings) {
    if (stop.empty()) continue;
    for (const std::string& text : strings) {
      ASSERT_EQ(HeldBack(text, {stop}), BruteHeldBack(text, {stop})) << text << " / " << stop;
    }
  }
  EXPECT_EQ(HeldBack("xxaab", {"aabaab", "bz"}), 3u);
  EXPECT_EQ(HeldBack("hello wor", {"world", "or"}), 3u);
  EXPECT_EQ(HeldBack("anything", {"x"}), 0u);  // a one-byte stop is never pending
}

TEST(StopStringsTest, FindStopReturnsTheEarliestStartInTheNewText) {
  const std::string text = "the cat sat on the mat";
  EXPECT_EQ(FindStop(text, 0, {"mat", "cat"}), 4u);
  // Only stops that end after byte 10 count; "sat" ends at 11.
  EXPECT_EQ(FindStop(text, 10, {"cat", "sat"}), 8u);
  EXPECT_EQ(FindStop(text, 22, {"cat"}), std::string::npos);
}

}  // namespace
}  // namespace pagoda::engine
