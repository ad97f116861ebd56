#include "grammar/utf8_ranges.h"

#include <algorithm>
#include <map>
#include <utility>

namespace pagoda::grammar {
namespace {

// The largest code point of each encoded length but the last.
constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF};

int EncodedLength(uint32_t cp) {
  if (cp <= 0x7F) return 1;
  if (cp <= 0x7FF) return 2;
  if (cp <= 0xFFFF) return 3;
  return 4;
}

// Encodes `cp` (any value up to U+10FFFF) into `out`; returns the length.
int Encode(uint32_t cp, uint8_t out[4]) {
  const int n = EncodedLength(cp);
  static constexpr uint8_t kLead[] = {0x00, 0x00, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
  return n;
}

}  // namespace

std::vector<CodePointRange> NormalizeScalarRanges(std::vector<CodePointRange> ranges) {
  std::vector<CodePointRange> cut;
  for (CodePointRange r : ranges) {
    if (r.lo > r.hi || r.lo > kMaxCodePoint) continue;
    r.hi = std::min(r.hi, kMaxCodePoint);
    if (r.lo <= 0xDFFF && r.hi >= 0xD800) {
      if (r.lo < 0xD800) cut.push_back({r.lo, 0xD7FF});
      if (r.hi > 0xDFFF) cut.push_back({0xE000, r.hi});
    } else {
      cut.push_back(r);
    }
  }
  std::sort(cut.begin(), cut.end());
  std::vector<CodePointRange> out;
  for (const CodePointRange& r : cut) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<CodePointRange> ComplementScalarRanges(const std::vector<CodePointRange>& normalized) {
  std::vector<CodePointRange> out;
  uint32_t next = 0;  // the smallest value not yet covered
  for (const CodePointRange& r : normalized) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  // The gaps may span the surrogates (never members): cut them out.
  return NormalizeScalarRanges(std::move(out));
}

void AppendUtf8Sequences(CodePointRange range, std::vector<Utf8Sequence>* out) {
  // Ranges still to split; the lower part of a split is pushed last so it comes out first.
  std::vector<CodePointRange> todo = {range};
  while (!todo.empty()) {
    const CodePointRange r = todo.back();
    todo.pop_back();
    if (r.lo > r.hi || r.lo > kMaxCodePoint) continue;
    const uint32_t lo = r.lo;
    const uint32_t hi = std::min(r.hi, kMaxCodePoint);
    if (lo <= 0xDFFF && hi >= 0xD800) {
      if (hi > 0xDFFF) todo.push_back({0xE000, hi});
      if (lo < 0xD800) todo.push_back({lo, 0xD7FF});
      continue;
    }
    bool split = false;
    for (uint32_t end : kLengthEnds) {
      if (lo <= end && hi > end) {
        todo.push_back({end + 1, hi});
        todo.push_back({lo, end});
        split = true;
        break;
      }
    }
    if (split) continue;
    // Same length: lo and hi must agree above each continuation boundary, or the range
    // must cover whole blocks below it.
    const int n = EncodedLength(lo);
    for (int i = 1; i < n && !split; ++i) {
      const uint32_t mask = (uint32_t{1} << (6 * i)) - 1;
      if ((lo & ~mask) == (hi & ~mask)) continue;
      if ((lo & mask) != 0) {
        todo.push_back({(lo | mask) + 1, hi});
        todo.push_back({lo, lo | mask});
        split = true;
      } else if ((hi & mask) != mask) {
        todo.push_back({hi & ~mask, hi});
        todo.push_back({lo, (hi & ~mask) - 1});
        split = true;
      }
    }
    if (split) continue;
    uint8_t a[4];
    uint8_t z[4];
    Encode(lo, a);
    Encode(hi, z);
    Utf8Sequence seq(n);
    for (int k = 0; k < n; ++k) seq[k] = ByteRange{a[k], z[k]};
    out->push_back(std::move(seq));
  }
}

void AppendUtf8(uint32_t cp, std::string* out) {
  uint8_t bytes[4];
  const int n = Encode(cp, bytes);
  out->append(reinterpret_cast<const char*>(bytes), n);
}

int DecodeUtf8(absl::string_view text, uint32_t* cp) {
  if (text.empty()) return 0;
  const auto b0 = static_cast<uint8_t>(text[0]);
  int n;
  uint32_t value;
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    value = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    value = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    value = b0 & 0x07;
  } else {
    return 0;  // a continuation byte, an overlong lead (C0, C1) or above U+10FFFF (F5..)
  }
  if (text.size() < static_cast<size_t>(n)) return 0;
  for (int k = 1; k < n; ++k) {
    const auto b = static_cast<uint8_t>(text[k]);
    if ((b & 0xC0) != 0x80) return 0;
    value = (value << 6) | (b & 0x3F);
  }
  if (EncodedLength(value) != n || IsSurrogate(value) || value > kMaxCodePoint) return 0;
  *cp = value;
  return n;
}

Symbol Utf8SetSymbol(const std::vector<CodePointRange>& normalized, absl::string_view name,
                     GrammarBuilder* b) {
  std::vector<Utf8Sequence> seqs;
  for (const CodePointRange& r : normalized) AppendUtf8Sequences(r, &seqs);
  // Sequences with the same length and the same continuation ranges share an alternative
  // (their first bytes united); the map keeps the alternatives in a stable order.
  std::map<std::vector<std::pair<uint8_t, uint8_t>>, ByteSet> groups;
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> order;
  for (const Utf8Sequence& seq : seqs) {
    std::vector<std::pair<uint8_t, uint8_t>> tail;
    for (size_t k = 1; k < seq.size(); ++k) tail.emplace_back(seq[k].lo, seq[k].hi);
    auto [it, inserted] = groups.try_emplace(tail);
    if (inserted) order.push_back(tail);
    it->second.AddRange(seq[0].lo, seq[0].hi);
  }
  if (order.size() == 1 && order[0].empty()) return b->Bytes(groups.begin()->second);
  const int32_t rule = b->NewRule(name);
  for (const auto& tail : order) {
    std::vector<Symbol> alt = {b->Bytes(groups[tail])};
    for (const auto& [lo, hi] : tail) alt.push_back(b->Bytes(ByteSet().AddRange(lo, hi)));
    b->AddAlternative(rule, std::move(alt));
  }
  return b->Ref(rule);
}

}  // namespace pagoda::grammar
