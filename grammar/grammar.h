// A context-free grammar over bytes, flattened for the matcher: every rule is a list of
// alternatives, every alternative a run of elements in one array ended by kEnd. An element
// is a byte set (one byte of input drawn from it) or a reference to a rule. Built with
// GrammarBuilder, which refuses left recursion (the matcher expands references eagerly, so
// a rule that can reach itself without consuming a byte would never stop).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pagoda::grammar {

// A set of byte values, one bit per value.
struct ByteSet {
  std::array<uint64_t, 4> bits{};

  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  // Adds every byte in [lo, hi].
  ByteSet& AddRange(uint8_t lo, uint8_t hi);
  ByteSet& Add(uint8_t b) { return AddRange(b, b); }
  bool operator==(const ByteSet&) const = default;
};

enum class ElementKind : uint8_t { kBytes, kRule, kEnd };

// kBytes: `arg` indexes Grammar::byte_set; kRule: `arg` is a rule id; kEnd: ends an
// alternative (`arg` is the rule it belongs to).
struct Element {
  ElementKind kind = ElementKind::kEnd;
  int32_t arg = 0;
};

// Immutable once built: shared by every matcher of every request that uses it.
class Grammar {
 public:
  int32_t root() const { return root_; }
  int32_t num_rules() const { return static_cast<int32_t>(rule_alts_.size()); }
  const Element& element(int32_t pos) const { return elements_[pos]; }
  size_t num_elements() const { return elements_.size(); }
  // Start positions (into the element array) of rule `rule`'s alternatives.
  absl::Span<const int32_t> alternatives(int32_t rule) const { return rule_alts_[rule]; }
  const ByteSet& byte_set(int32_t index) const { return byte_sets_[index]; }
  const std::string& rule_name(int32_t rule) const { return rule_names_[rule]; }
  // True when every alternative of `rule` starts with a byte set (the matcher's fast path).
  bool starts_with_bytes(int32_t rule) const { return starts_with_bytes_[rule]; }
  // GBNF-like text of every rule, for tests and debugging.
  std::string ToString() const;

 private:
  friend class GrammarBuilder;
  int32_t root_ = 0;
  std::vector<Element> elements_;
  std::vector<std::vector<int32_t>> rule_alts_;
  std::vector<ByteSet> byte_sets_;
  std::vector<std::string> rule_names_;
  std::vector<bool> starts_with_bytes_;
};

// A symbol of an alternative being built.
struct Symbol {
  ElementKind kind;  // kBytes or kRule
  int32_t arg;
};

class GrammarBuilder {
 public:
  // At most `max_size` (see size()): past it every addition is dropped (NewRule hands out a
  // placeholder id), over_limit() turns true and Build fails, so a compiler's memory stays
  // bounded inside any loop, however many elements that loop would add.
  explicit GrammarBuilder(size_t max_size = size_t{1} << 22) : max_size_(max_size) {}

  // Declares a rule (alternatives may be added later, so rules can refer to each other).
  int32_t NewRule(absl::string_view name);
  // Appends an alternative to `rule`; an empty sequence matches the empty string.
  void AddAlternative(int32_t rule, std::vector<Symbol> sequence);
  Symbol Bytes(const ByteSet& set);
  Symbol Byte(uint8_t b) { return Bytes(ByteSet().Add(b)); }
  Symbol Ref(int32_t rule) const { return Symbol{ElementKind::kRule, rule}; }
  // Appends the bytes of `text` as one-byte sets to `sequence`.
  void AppendLiteral(absl::string_view text, std::vector<Symbol>* sequence);
  // A rule matching exactly `text`.
  int32_t LiteralRule(absl::string_view text);
  // A rule matching `item` repeated between min and max times (max < 0: unbounded), each
  // repetition after the first preceded by `separator` when separator >= 0 (a rule id).
  int32_t Repeat(absl::string_view name, Symbol item, int min, int max, int32_t separator = -1);
  // The grammar's size so far: its elements, rules and byte sets (the compilers' budget).
  size_t size() const { return num_elements_ + rules_.size() + byte_sets_.size(); }
  size_t max_size() const { return max_size_; }
  // True once an addition was dropped for max_size.
  bool over_limit() const { return over_limit_; }

  // The grammar rooted at `root`. InvalidArgument when the builder went over its limit
  // ("grammar over N elements"), a rule has no alternative or some rule is left-recursive
  // (names it).
  absl::StatusOr<Grammar> Build(int32_t root) &&;

 private:
  // `rest` optional repetitions of `item` (each preceded by `sep` when sep is set).
  int32_t OptionalChain(absl::string_view name, Symbol item, int rest, const Symbol* sep);

  // False (and over_limit_ set) when `more` would take size() past max_size_.
  bool Fits(size_t more);

  std::vector<std::string> names_;
  std::vector<std::vector<std::vector<Symbol>>> rules_;
  std::vector<ByteSet> byte_sets_;
  size_t num_elements_ = 0;
  size_t max_size_;
  bool over_limit_ = false;
};

}  // namespace pagoda::grammar
