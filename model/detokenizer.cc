#include "model/tokenizer.h"
#include "model/utf8.h"

namespace pagoda::model {

// pending_ only ever holds a proper prefix of a valid character (at most 3 bytes): every
// other byte is emitted, as itself or as U+FFFD, by the same rule Tokenizer::Decode applies
// to the whole text, so the deltas add up to Decode's result.
std::string IncrementalDetokenizer::Append(int32_t id) {
  pending_ += tokenizer_->TokenBytes(id);
  std::string out;
  const size_t used = AppendSanitizedUtf8(pending_, /*at_end=*/false, &out);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out;
  AppendSanitizedUtf8(pending_, /*at_end=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace pagoda::model
