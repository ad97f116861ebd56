#include "grammar/matcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pagoda::grammar {
namespace {

uint64_t Key(int32_t pos, int32_t frame) {
  return (uint64_t{static_cast<uint32_t>(pos)} << 32) | static_cast<uint32_t>(frame);
}

// Up to this many heads a linear search deduplicates faster than a hash set.
constexpr size_t kLinearHeads = 16;

// The name a rule was declared with: the builder appends "-ID" to keep names unique.
absl::string_view DeclaredName(const std::string& name) {
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos || dash + 1 == name.size()) return name;
  for (size_t i = dash + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return absl::string_view(name).substr(0, dash);
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, const MatcherLimits& limits)
    : grammar_(std::move(grammar)), limits_(limits) {
  BeginExpansion(&heads_);
  for (int32_t start : grammar_->alternatives(grammar_->root())) {
    if (!Expand(start, -1, &heads_, &can_end_)) {
      heads_.clear();
      arena_.clear();
      can_end_ = false;
      return;
    }
  }
}

void Matcher::Exhausted(const char* limit, int64_t value, int32_t pos) {
  const Grammar& g = *grammar_;
  int32_t end = pos;
  while (g.element(end).kind != ElementKind::kEnd) ++end;
  status_ = absl::ResourceExhaustedError(
      absl::StrCat("grammar: ", limit, " (", value, ") reached while expanding rule '",
                   DeclaredName(g.rule_name(g.element(end).arg)),
                   "': the grammar is too ambiguous to follow within the limit"));
}

void Matcher::BeginExpansion(std::vector<Head>* out) {
  out->clear();
  visited_.clear();
  head_set_.clear();
  byte_budget_ = limits_.max_steps_per_byte;
}

bool Matcher::AddHead(const Head& head, std::vector<Head>* out) {
  if (out->size() < kLinearHeads) {
    if (std::find(out->begin(), out->end(), head) != out->end()) return true;
  } else {
    if (head_set_.empty()) {
      for (const Head& h : *out) head_set_.insert(Key(h.pos, h.frame));
    }
    if (!head_set_.insert(Key(head.pos, head.frame)).second) return true;
  }
  if (out->size() >= limits_.max_heads) {
    Exhausted("max_heads", static_cast<int64_t>(limits_.max_heads), head.pos);
    return false;
  }
  out->push_back(head);
  return true;
}

bool Matcher::Expand(int32_t pos, int32_t frame, std::vector<Head>* out, bool* can_end) {
  const Grammar& g = *grammar_;
  todo_.clear();
  todo_.push_back(Head{pos, frame});
  while (!todo_.empty()) {
    pos = todo_.back().pos;
    frame = todo_.back().frame;
    todo_.pop_back();
    for (;;) {
      ++steps_;
      if (--byte_budget_ < 0) {
        Exhausted("max_steps_per_byte", limits_.max_steps_per_byte, pos);
        return false;
      }
      const Element& e = g.element(pos);
      if (e.kind == ElementKind::kBytes) {
        if (!AddHead(Head{pos, frame}, out)) return false;
        break;
      }
      if (e.kind == ElementKind::kEnd) {
        if (frame < 0) {
          *can_end = true;
          break;
        }
        const Frame f = arena_[frame];
        pos = f.ret;
        frame = f.parent;
        continue;
      }
      // A reference, expanded once per byte whatever the paths that reach it: what it
      // leads to depends only on (pos, frame), so a second path would add nothing.
      if (!visited_.insert(Key(pos, frame)).second) break;
      // The callee returns to pos + 1, or straight to our caller when pos + 1 ends this
      // alternative (a tail call keeps the stack flat).
      int32_t callee = frame;
      if (g.element(pos + 1).kind != ElementKind::kEnd) {
        if (interned_frames_ != nullptr) {
          const auto [it, added] = interned_frames_->try_emplace(
              Key(pos + 1, frame), static_cast<int32_t>(arena_.size()));
          if (added) arena_.push_back(Frame{pos + 1, frame});
          callee = it->second;
        } else {
          arena_.push_back(Frame{pos + 1, frame});
          callee = static_cast<int32_t>(arena_.size() - 1);
        }
      }
      const auto alts = g.alternatives(e.arg);
      if (g.starts_with_bytes(e.arg)) {
        // Each alternative is a head.
        steps_ += static_cast<int64_t>(alts.size());
        byte_budget_ -= static_cast<int64_t>(alts.size());
        for (int32_t start : alts) {
          if (!AddHead(Head{start, callee}, out)) return false;
        }
        break;
      }
      for (size_t i = alts.size(); i-- > 1;) todo_.push_back(Head{alts[i], callee});
      pos = alts[0];
      frame = callee;
    }
  }
  return true;
}

Matcher::StepResult Matcher::Step(const Head* in, size_t n, uint8_t b, std::vector<Head>* out,
                                  bool* can_end) {
  const Grammar& g = *grammar_;
  *can_end = false;
  if (!status_.ok()) {
    out->clear();
    return StepResult::kOverBudget;
  }
  BeginExpansion(out);
  for (size_t i = 0; i < n; ++i) {
    const Element& e = g.element(in[i].pos);
    if (!g.byte_set(e.arg).Has(b)) continue;
    if (!Expand(in[i].pos + 1, in[i].frame, out, can_end)) {
      out->clear();
      *can_end = false;
      return StepResult::kOverBudget;
    }
  }
  return !out->empty() || *can_end ? StepResult::kAccepted : StepResult::kRefused;
}

bool Matcher::Advance(std::string_view bytes) {
  if (!status_.ok()) return false;
  if (bytes.empty()) return true;
  const Snapshot before = Save();
  for (char c : bytes) {
    bool can_end = false;
    if (Step(heads_.data(), heads_.size(), static_cast<uint8_t>(c), &scratch_, &can_end) !=
        StepResult::kAccepted) {
      Restore(before);
      return false;
    }
    heads_.swap(scratch_);
    can_end_ = can_end;
  }
  return true;
}

void Matcher::Restore(const Snapshot& snapshot) {
  arena_.resize(snapshot.arena_size);
  heads_ = snapshot.heads;
  can_end_ = snapshot.can_end;
}

void Matcher::Compact() {
  // Parents always precede their children in the arena, so one backward pass marks every
  // frame a head reaches and one forward pass renumbers them in order.
  std::vector<int32_t> remap(arena_.size(), -1);
  for (const Head& h : heads_) {
    for (int32_t f = h.frame; f >= 0 && remap[f] != -2; f = arena_[f].parent) remap[f] = -2;
  }
  int32_t next = 0;
  for (size_t i = 0; i < arena_.size(); ++i) {
    if (remap[i] != -2) continue;
    const Frame f = arena_[i];
    arena_[next] = Frame{f.ret, f.parent < 0 ? -1 : remap[f.parent]};
    remap[i] = next++;
  }
  arena_.resize(next);
  for (Head& h : heads_) {
    if (h.frame >= 0) h.frame = remap[h.frame];
  }
}

}  // namespace pagoda::grammar
