#include "kernels/batch.h"

namespace pagoda::kernels {

void BatchInput::Clear() {
  token_ids.clear();
  positions.clear();
  slot_mapping.clear();
  query_start_loc.clear();
  seq_lens.clear();
  block_tables.clear();
  max_blocks_per_seq = 0;
  logits_indices.clear();
}

bool IsPlainDecode(const BatchInput& b) {
  if (b.num_tokens() != b.num_seqs() || b.num_logits() != b.num_tokens() ||
      b.query_start_loc.size() != b.seq_lens.size() + 1) {
    return false;
  }
  for (int32_t s = 0; s < b.num_seqs(); ++s) {
    if (b.query_start_loc[s] != s || b.logits_indices[s] != s) return false;
  }
  return b.query_start_loc.back() == b.num_seqs();
}

void PadDecodeBatch(const BatchInput& b, int32_t num_seqs, BatchInput* out) {
  *out = b;
  for (int32_t s = b.num_seqs(); s < num_seqs; ++s) {
    out->token_ids.push_back(0);
    out->positions.push_back(0);
    out->slot_mapping.push_back(-1);
    out->query_start_loc.push_back(s + 1);
    out->seq_lens.push_back(1);
    out->block_tables.insert(out->block_tables.end(), b.max_blocks_per_seq, 0);
    out->logits_indices.push_back(s);
  }
}

}  // namespace pagoda::kernels
