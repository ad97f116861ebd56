// Stop-string matching over streamed text: where a stop string first ends, and how many
// trailing bytes must wait because the next token may complete one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::engine {

// Start of the earliest stop string that ends inside the text appended after byte
// `old_size` of `text`, or npos.
size_t FindStop(const std::string& text, size_t old_size, const std::vector<std::string>& stops);

// Length of the longest suffix of `text` that is a proper prefix of some stop string.
// O(total stop bytes) per call.
size_t HeldBack(std::string_view text, const std::vector<std::string>& stops);

}  // namespace pagoda::engine
