// The flat batch description a step hands to a backend: prefill chunks and decode tokens
// of many sequences in one batch, no padding.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::kernels {

// Sequence s owns query tokens [query_start_loc[s], query_start_loc[s+1]); they are the
// last (query_start_loc[s+1] - query_start_loc[s]) tokens of its context of seq_lens[s]
// tokens, so token j of that range has position seq_lens[s] - q_len + j.
struct BatchInput {
  std::vector<int32_t> token_ids;        // [num_tokens]
  std::vector<int32_t> positions;        // [num_tokens]: index of each token in its sequence
  std::vector<int32_t> slot_mapping;     // [num_tokens]: cache slot each new token's K/V goes to
  std::vector<int32_t> query_start_loc;  // [num_seqs + 1]
  std::vector<int32_t> seq_lens;         // [num_seqs]: context length after this step
  std::vector<int32_t> block_tables;     // [num_seqs][max_blocks_per_seq], padded with 0
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logits_indices;  // [num_logits]: token rows that need logits

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens.size()); }
  int32_t num_logits() const { return static_cast<int32_t>(logits_indices.size()); }
  void Clear();
};

// True when every sequence of `b` has exactly one query token and every token needs logits
// (in token order): a plain decode step.
bool IsPlainDecode(const BatchInput& b);

// Pads the plain decode step `b` (IsPlainDecode) to `num_seqs` sequences: each added one is
// token 0 at position 0 with slot -1 (its K/V written nowhere), context 1, a block table
// row of block 0 (b.max_blocks_per_seq >= 1) and a logits row after the real ones. The
// real sequences keep their rows, so logits row r still belongs to sequence r.
// `num_seqs` <= b.num_seqs() copies b.
// A backend that records decode steps (CUDA graphs) replays one step for every batch size
// padded to the same count (Backend::RecordableBatchSize).
void PadDecodeBatch(const BatchInput& b, int32_t num_seqs, BatchInput* out);

}  // namespace pagoda::kernels
