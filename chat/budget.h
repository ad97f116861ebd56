// What one render may spend. A template comes from an untrusted GGUF file or a
// --chat-template file, so every loop, call, string and list it makes is charged here,
// before the work or the allocation, and a render that would exceed a limit stops with an
// error naming it (docs/HARDENING.md, "Chat template budgets").
#pragma once

#include <cstdint>

namespace pagoda::chat {

// The limits of one render (ChatTemplate::Render). The defaults leave real templates a
// wide margin and cost well under a second of CPU and a few hundred MiB at worst.
struct RenderBudget {
  // Steps: every statement and expression evaluated, loop iteration, call, and every
  // element, scope or 256 bytes of text a filter, test or method walks.
  int64_t max_steps = 5'000'000;
  // Bytes of every string and list the render builds or copies (the output included),
  // counted together over the render: it bounds the memory and the copying time.
  int64_t max_bytes = 64ll << 20;
  // Nesting of lists and dicts inside one value.
  int max_depth = 64;
  // Nested macro calls (a caller() counts as one).
  int max_call_depth = 64;
  // Statements and expressions evaluated inside each other, through macro calls too: it
  // bounds the C++ stack a render uses (about 1 KiB a level optimized, 7 KiB under ASan).
  int max_nesting = 500;
};

// The meter of one render: charges against a RenderBudget and throws
// TemplateError("budget") naming the budget when a charge would exceed it.
class Budget {
 public:
  explicit Budget(const RenderBudget& limits) : limits_(limits) {}
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  // Charges `n` steps.
  void Steps(uint64_t n);
  // Charges a walk over `bytes` bytes of text (one step per 256 bytes, at least one).
  void Scan(uint64_t bytes) { Steps(1 + bytes / 256); }
  // Charges `n` bytes about to be allocated; call before allocating.
  void Bytes(uint64_t n);
  // Charges the bytes of `count` items of `size` bytes each, without overflow.
  void Bytes(uint64_t count, uint64_t size);
  // Fails when a value nests `depth` lists/dicts deep and that is over max_depth.
  void CheckDepth(int depth) const;

  // Counts one nested call while it lives; fails past max_call_depth.
  class Call {
   public:
    explicit Call(Budget& budget);
    ~Call() { --budget_.calls_; }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    Budget& budget_;
  };

  // Counts one level of evaluation nesting while it lives; fails past max_nesting.
  class Nest {
   public:
    explicit Nest(Budget& budget);
    ~Nest() { --budget_.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Budget& budget_;
  };

  const RenderBudget& limits() const { return limits_; }
  int64_t steps() const { return static_cast<int64_t>(steps_); }
  int64_t bytes() const { return static_cast<int64_t>(bytes_); }

 private:
  [[noreturn]] static void Exceeded(const char* what, int64_t limit);

  const RenderBudget limits_;
  uint64_t steps_ = 0;
  uint64_t bytes_ = 0;
  int calls_ = 0;
  int nesting_ = 0;
};

}  // namespace pagoda::chat
