#include "grammar/grammar.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagoda::grammar {

ByteSet& ByteSet::AddRange(uint8_t lo, uint8_t hi) {
  for (int b = lo; b <= hi; ++b) bits[b >> 6] |= uint64_t{1} << (b & 63);
  return *this;
}

namespace {

std::string ByteText(int b) {
  if (b >= 0x21 && b <= 0x7E && b != '\\' && b != ']' && b != '-' && b != '"') {
    return std::string(1, static_cast<char>(b));
  }
  return absl::StrFormat("\\x%02X", b);
}

std::string SetText(const ByteSet& set) {
  int count = 0;
  int only = -1;
  for (int b = 0; b < 256; ++b) {
    if (set.Has(b)) {
      ++count;
      only = b;
    }
  }
  if (count == 1) return absl::StrCat("\"", ByteText(only), "\"");
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!set.Has(b)) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && set.Has(e + 1)) ++e;
    absl::StrAppend(&out, ByteText(b));
    if (e > b) absl::StrAppend(&out, "-", ByteText(e));
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::ToString() const {
  std::string out;
  for (int32_t r = 0; r < num_rules(); ++r) {
    absl::StrAppend(&out, rule_names_[r], " ::=");
    const char* bar = " ";
    for (int32_t start : rule_alts_[r]) {
      absl::StrAppend(&out, bar);
      bar = " | ";
      if (elements_[start].kind == ElementKind::kEnd) absl::StrAppend(&out, "\"\"");
      for (int32_t p = start; elements_[p].kind != ElementKind::kEnd; ++p) {
        if (p != start) absl::StrAppend(&out, " ");
        const Element& e = elements_[p];
        absl::StrAppend(
            &out, e.kind == ElementKind::kRule ? rule_names_[e.arg] : SetText(byte_sets_[e.arg]));
      }
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

bool GrammarBuilder::Fits(size_t more) {
  if (!over_limit_ && size() + more <= max_size_) return true;
  over_limit_ = true;
  return false;
}

int32_t GrammarBuilder::NewRule(absl::string_view name) {
  // Over the limit: a placeholder (the first rule) that Build never gets to use.
  if (!Fits(1) && !rules_.empty()) return 0;
  names_.emplace_back(absl::StrCat(name, "-", static_cast<int64_t>(names_.size())));
  rules_.emplace_back();
  return static_cast<int32_t>(rules_.size() - 1);
}

void GrammarBuilder::AddAlternative(int32_t rule, std::vector<Symbol> sequence) {
  if (!Fits(sequence.size() + 1)) return;
  num_elements_ += sequence.size() + 1;
  rules_[rule].push_back(std::move(sequence));
}

Symbol GrammarBuilder::Bytes(const ByteSet& set) {
  for (size_t i = byte_sets_.size(); i-- > 0 && i + 64 >= byte_sets_.size();) {
    if (byte_sets_[i] == set) return Symbol{ElementKind::kBytes, static_cast<int32_t>(i)};
  }
  if (!Fits(1) && !byte_sets_.empty()) return Symbol{ElementKind::kBytes, 0};
  byte_sets_.push_back(set);
  return Symbol{ElementKind::kBytes, static_cast<int32_t>(byte_sets_.size() - 1)};
}

void GrammarBuilder::AppendLiteral(absl::string_view text, std::vector<Symbol>* sequence) {
  if (!Fits(text.size())) return;  // the sequence would be dropped when added
  for (char c : text) sequence->push_back(Byte(static_cast<uint8_t>(c)));
}

int32_t GrammarBuilder::LiteralRule(absl::string_view text) {
  const int32_t rule = NewRule("lit");
  std::vector<Symbol> seq;
  AppendLiteral(text, &seq);
  AddAlternative(rule, std::move(seq));
  return rule;
}

int32_t GrammarBuilder::OptionalChain(absl::string_view name, Symbol item, int rest,
                                      const Symbol* sep) {
  if (rest == 0) return -1;
  // opt(k) ::= "" | sep item opt(k-1)   (built innermost first; unbounded: opt refers to
  // itself, a tail reference the matcher runs without growing its stack).
  const int32_t rule = NewRule(name);
  std::vector<Symbol> seq;
  if (sep != nullptr) seq.push_back(*sep);
  seq.push_back(item);
  if (rest < 0) {
    seq.push_back(Ref(rule));
  } else {
    const int32_t next = OptionalChain(name, item, rest - 1, sep);
    if (next >= 0) seq.push_back(Ref(next));
  }
  AddAlternative(rule, {});
  AddAlternative(rule, std::move(seq));
  return rule;
}

int32_t GrammarBuilder::Repeat(absl::string_view name, Symbol item, int min, int max,
                               int32_t separator) {
  const Symbol sep_symbol = Ref(separator);
  const Symbol* sep = separator >= 0 ? &sep_symbol : nullptr;
  const int32_t rule = NewRule(name);
  if (min == 0) {
    // "" | item opt(max - 1)
    AddAlternative(rule, {});
    if (max == 0) return rule;
    std::vector<Symbol> seq = {item};
    const int32_t tail = OptionalChain(name, item, max < 0 ? -1 : max - 1, sep);
    if (tail >= 0) seq.push_back(Ref(tail));
    AddAlternative(rule, std::move(seq));
    return rule;
  }
  std::vector<Symbol> seq = {item};
  for (int i = 1; i < min; ++i) {
    if (sep != nullptr) seq.push_back(*sep);
    seq.push_back(item);
  }
  const int32_t tail = OptionalChain(name, item, max < 0 ? -1 : max - min, sep);
  if (tail >= 0) seq.push_back(Ref(tail));
  AddAlternative(rule, std::move(seq));
  return rule;
}

absl::StatusOr<Grammar> GrammarBuilder::Build(int32_t root) && {
  if (over_limit_) {
    return absl::InvalidArgumentError(absl::StrCat("grammar over ", max_size_, " elements"));
  }
  const int32_t n = static_cast<int32_t>(rules_.size());
  for (int32_t r = 0; r < n; ++r) {
    if (rules_[r].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("grammar: rule ", names_[r], " is empty"));
    }
  }
  // Nullable rules, to a fixed point.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules_[r]) {
        bool all = true;
        for (const Symbol& s : alt) {
          if (s.kind == ElementKind::kBytes || !nullable[s.arg]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  // Left corners: r -> s when s can start r with nothing consumed before it.
  std::vector<std::vector<int32_t>> corners(n);
  for (int32_t r = 0; r < n; ++r) {
    for (const auto& alt : rules_[r]) {
      for (const Symbol& s : alt) {
        if (s.kind == ElementKind::kBytes) break;
        corners[r].push_back(s.arg);
        if (!nullable[s.arg]) break;
      }
    }
  }
  // Iterative DFS for a cycle (0 unseen, 1 on the path, 2 done).
  std::vector<uint8_t> mark(n, 0);
  for (int32_t start = 0; start < n; ++start) {
    if (mark[start] != 0) continue;
    std::vector<std::pair<int32_t, size_t>> path = {{start, 0}};
    mark[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == corners[r].size()) {
        mark[r] = 2;
        path.pop_back();
        continue;
      }
      const int32_t s = corners[r][next++];
      if (mark[s] == 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("grammar: rule ", names_[s], " is left-recursive"));
      }
      if (mark[s] == 0) {
        mark[s] = 1;
        path.emplace_back(s, 0);
      }
    }
  }
  Grammar g;
  g.root_ = root;
  g.rule_alts_.resize(n);
  g.elements_.reserve(num_elements_);
  for (int32_t r = 0; r < n; ++r) {
    for (const auto& alt : rules_[r]) {
      g.rule_alts_[r].push_back(static_cast<int32_t>(g.elements_.size()));
      for (const Symbol& s : alt) g.elements_.push_back(Element{s.kind, s.arg});
      g.elements_.push_back(Element{ElementKind::kEnd, r});
    }
  }
  g.starts_with_bytes_.resize(n);
  for (int32_t r = 0; r < n; ++r) {
    bool all = true;
    for (const auto& alt : rules_[r])
      all = all && !alt.empty() && alt[0].kind == ElementKind::kBytes;
    g.starts_with_bytes_[r] = all;
  }
  g.byte_sets_ = std::move(byte_sets_);
  g.rule_names_ = std::move(names_);
  return g;
}

}  // namespace pagoda::grammar
