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

}  // namespace pagoda::kernels
