#include "engine/model_runner.h"

#include <algorithm>

#include "common/status_macros.h"
#include "engine/kv_block_copy.h"

namespace pagoda::engine {

void ModelRunner::BuildBatch(const SchedulerOutput& output, kernels::BatchInput* b) const {
  b->Clear();
  int32_t max_blocks = 1;
  for (const ScheduledChunk& c : output.chunks) {
    max_blocks = std::max<int32_t>(max_blocks, kv_->BlocksFor(c.seq->num_computed + c.num_tokens));
  }
  b->max_blocks_per_seq = max_blocks;
  b->query_start_loc.push_back(0);
  for (const ScheduledChunk& c : output.chunks) {
    const Sequence& seq = *c.seq;
    const int32_t start = seq.num_computed;
    for (int32_t j = start; j < start + c.num_tokens; ++j) {
      b->token_ids.push_back(seq.tokens[j]);
      b->positions.push_back(j);
      b->slot_mapping.push_back(kv_->Slot(seq.id, j));
    }
    b->query_start_loc.push_back(b->num_tokens());
    b->seq_lens.push_back(start + c.num_tokens);
    const std::vector<int32_t>& table = kv_->BlockTable(seq.id);
    const int32_t used = kv_->BlocksFor(start + c.num_tokens);
    b->block_tables.insert(b->block_tables.end(), table.begin(), table.begin() + used);
    b->block_tables.resize(b->block_tables.size() + (max_blocks - used), 0);
    const auto [lp_begin, lp_end] = PromptLogprobRows(c);
    const int32_t chunk_start = b->num_tokens() - c.num_tokens;
    for (int32_t p = lp_begin; p < lp_end; ++p) {
      b->logits_indices.push_back(chunk_start + (p - start));
    }
    if (Samples(c)) b->logits_indices.push_back(b->num_tokens() - 1);
  }
}

absl::Status ModelRunner::Execute(const SchedulerOutput& output, std::vector<float>* logits) {
  // Block copies first: the chunks may write into the copies and read what swaps in.
  if (!output.copies.empty() && fault_ != InjectedFault::kSkipCopies) {
    RETURN_IF_ERROR(CopyKvBlocks(*model_->backend(), cache_, swap_, output.copies));
  }
  if (output.chunks.empty()) {  // a step of copies only
    logits->clear();
    return absl::OkStatus();
  }
  BuildBatch(output, &batch_);
  if (fault_ == InjectedFault::kDropChunk && output.chunks.size() > 1) {
    const int32_t last = batch_.query_start_loc[batch_.num_seqs() - 1];
    std::fill(batch_.slot_mapping.begin() + last, batch_.slot_mapping.end(), -1);
  }
  logits->resize(static_cast<size_t>(batch_.num_logits()) * model_->config().vocab_size);
  return model_->Forward(batch_, cache_, logits->data());
}

}  // namespace pagoda::engine
