// The merge loop both tokenizers share (internal): symbols in a linked list over an array,
// candidate pairs in a priority queue, so a text of n characters costs O(n log n).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "model/utf8.h"

namespace pagoda::model::bpe {

// The system abseil has its own string_view type (not std::string_view), which its hash
// maps need for heterogeneous lookup.
inline absl::string_view Key(std::string_view s) { return {s.data(), s.size()}; }

// Bytes [start, start + len) of the text being merged, linked to its neighbours. A symbol
// merged into its left neighbour keeps len 0.
struct Symbol {
  size_t start;
  size_t len;
  int32_t prev;  // -1 at the ends
  int32_t next;
};

// One symbol per UTF-8 character; each byte that starts no valid character is its own.
inline std::vector<Symbol> SplitChars(std::string_view text) {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    if (CheckUtf8Char(text.substr(pos), &len) != Utf8Status::kComplete) len = 1;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({pos, len, index - 1, index + 1});
    pos += len;
  }
  if (!symbols.empty()) symbols.back().next = -1;
  return symbols;
}

// Repeatedly merges the adjacent pair with the highest priority (ties: the leftmost) until
// no adjacent pair has one. `priority(left, right)` returns nullopt for a pair that may not
// merge. Merges fold a symbol into its left neighbour, so symbol 0 always heads the list.
template <typename PriorityFn>
void Merge(std::string_view text, std::vector<Symbol>* symbols, PriorityFn priority) {
  // A queued pair; `len` is their joint length when queued: a different length later means
  // one of them has changed since and the entry is stale.
  struct Candidate {
    double priority;
    int32_t left;
    int32_t right;
    size_t len;
  };
  struct Less {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    }
  };
  std::vector<Symbol>& sym = *symbols;
  std::priority_queue<Candidate, std::vector<Candidate>, Less> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::optional<double> p = priority(text.substr(sym[left].start, sym[left].len),
                                             text.substr(sym[right].start, sym[right].len));
    if (p.has_value()) queue.push({*p, left, right, sym[left].len + sym[right].len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = sym[top.left];
    Symbol& right = sym[top.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != top.len) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.left;
    try_add(left.prev, top.left);
    try_add(top.left, left.next);
  }
}

}  // namespace pagoda::model::bpe
