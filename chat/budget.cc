#include "chat/budget.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "chat/error.h"

namespace pagoda::chat {
namespace {

// a + b, saturating instead of wrapping around.
uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<uint64_t>::max() : sum;
}

uint64_t Limit(int64_t limit) { return limit < 0 ? 0 : static_cast<uint64_t>(limit); }

}  // namespace

void Budget::Exceeded(const char* what, int64_t limit) {
  throw TemplateError("budget", absl::StrCat(what, " budget (", limit, ") exceeded"), 0);
}

void Budget::Steps(uint64_t n) {
  steps_ = SaturatingAdd(steps_, n);
  if (steps_ > Limit(limits_.max_steps)) Exceeded("step", limits_.max_steps);
}

void Budget::Bytes(uint64_t n) {
  bytes_ = SaturatingAdd(bytes_, n);
  if (bytes_ > Limit(limits_.max_bytes)) Exceeded("byte", limits_.max_bytes);
}

void Budget::Bytes(uint64_t count, uint64_t size) {
  uint64_t product;
  if (__builtin_mul_overflow(count, size, &product)) {
    product = std::numeric_limits<uint64_t>::max();
  }
  Bytes(product);
}

void Budget::CheckDepth(int depth) const {
  if (depth > limits_.max_depth) Exceeded("value depth", limits_.max_depth);
}

Budget::Call::Call(Budget& budget) : budget_(budget) {
  if (budget_.calls_ >= budget_.limits_.max_call_depth) {
    Exceeded("call depth", budget_.limits_.max_call_depth);
  }
  ++budget_.calls_;
}

Budget::Nest::Nest(Budget& budget) : budget_(budget) {
  if (budget_.nesting_ >= budget_.limits_.max_nesting) {
    Exceeded("nesting", budget_.limits_.max_nesting);
  }
  ++budget_.nesting_;
}

}  // namespace pagoda::chat
