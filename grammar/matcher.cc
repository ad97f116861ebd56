#include "grammar/matcher.h"

#include <algorithm>
#include <utility>

namespace pagoda::grammar {

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  for (int32_t start : grammar_->alternatives(grammar_->root())) {
    Expand(start, -1, &heads_, &can_end_);
  }
}

void Matcher::Expand(int32_t pos, int32_t frame, std::vector<Head>* out, bool* can_end) {
  const Grammar& g = *grammar_;
  for (;;) {
    const Element& e = g.element(pos);
    if (e.kind == ElementKind::kBytes) {
      const Head head{pos, frame};
      if (std::find(out->begin(), out->end(), head) == out->end()) out->push_back(head);
      return;
    }
    if (e.kind == ElementKind::kEnd) {
      if (frame < 0) {
        *can_end = true;
        return;
      }
      const Frame f = arena_[frame];
      pos = f.ret;
      frame = f.parent;
      continue;
    }
    // A reference: the callee returns to pos + 1, or straight to our caller when pos + 1
    // ends this alternative (a tail call keeps the stack flat).
    int32_t callee = frame;
    bool fresh = g.element(pos + 1).kind != ElementKind::kEnd;
    if (fresh && interned_frames_ != nullptr) {
      const uint64_t key =
          (uint64_t{static_cast<uint32_t>(pos + 1)} << 32) | static_cast<uint32_t>(frame);
      const auto [it, added] =
          interned_frames_->try_emplace(key, static_cast<int32_t>(arena_.size()));
      if (added) arena_.push_back(Frame{pos + 1, frame});
      callee = it->second;
      fresh = false;  // shared: other heads may already stand on it
    } else if (fresh) {
      arena_.push_back(Frame{pos + 1, frame});
      callee = static_cast<int32_t>(arena_.size() - 1);
    }
    const auto alts = g.alternatives(e.arg);
    if (g.starts_with_bytes(e.arg)) {
      // Each alternative is a head; under a fresh frame no other head has, none repeats.
      for (int32_t start : alts) {
        const Head head{start, callee};
        if (fresh || std::find(out->begin(), out->end(), head) == out->end()) out->push_back(head);
      }
      return;
    }
    for (size_t i = 0; i + 1 < alts.size(); ++i) Expand(alts[i], callee, out, can_end);
    pos = alts.back();
    frame = callee;
  }
}

bool Matcher::Step(const Head* in, size_t n, uint8_t b, std::vector<Head>* out, bool* can_end) {
  const Grammar& g = *grammar_;
  out->clear();
  *can_end = false;
  for (size_t i = 0; i < n; ++i) {
    const Element& e = g.element(in[i].pos);
    if (g.byte_set(e.arg).Has(b)) Expand(in[i].pos + 1, in[i].frame, out, can_end);
  }
  if (out->size() > kMaxHeads) {  // a pathologically ambiguous grammar: refuse the byte
    out->clear();
    *can_end = false;
    return false;
  }
  return !out->empty() || *can_end;
}

bool Matcher::Advance(std::string_view bytes) {
  if (bytes.empty()) return true;
  const Snapshot before = Save();
  for (char c : bytes) {
    bool can_end = false;
    if (!Step(heads_.data(), heads_.size(), static_cast<uint8_t>(c), &scratch_, &can_end)) {
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
