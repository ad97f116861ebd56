#include "kernels/cuda/attention_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pagoda::kernels::cuda {
namespace {

// Split-KV partitions: at least 128 tokens, at most 32 per sequence (the reduce kernel's and
// the partials' cost grows with their number), a power of two (no small remainder partition
// when contexts are round). Measured on an H200 (docs/GPU.md, "Split-KV partition size").
constexpr int32_t kMinPartition = 128;
constexpr int32_t kMaxPartitions = 32;
constexpr int32_t kMaxTensorCoreGroup = kPrefillTileRows;

int32_t RoundUp(int64_t x, int64_t m) { return static_cast<int32_t>((x + m - 1) / m * m); }

bool IsPowerOfTwo(int32_t x) { return x > 0 && (x & (x - 1)) == 0; }

// Checks that positions [0, context) of sequence s resolve to blocks inside the cache.
absl::Status CheckBlockTable(const BatchInput& batch, int32_t s, int32_t context,
                             const AttentionPlanOptions& o) {
  const int64_t needed = (int64_t{context} + o.block_size - 1) / o.block_size;
  if (needed > batch.max_blocks_per_seq) {
    return absl::InvalidArgumentError(absl::StrCat("cuda attention: sequence ", s, " context ",
                                                   context, " exceeds its block table"));
  }
  const int32_t* table = batch.block_tables.data() + int64_t{s} * batch.max_blocks_per_seq;
  for (int64_t b = 0; b < needed; ++b) {
    if (table[b] < 0 || table[b] >= o.num_blocks) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda attention: block id ", table[b], " outside the cache"));
    }
  }
  return absl::OkStatus();
}

// Items of one decode token with `context` keys: the whole range, or partitions of about
// `partition` tokens (multiples of 16) when the context is longer.
void AddDecodeItems(int32_t token, int32_t s, int32_t context, int32_t partition,
                    AttentionPlan* plan) {
  const int32_t parts = partition > 0 ? (context + partition - 1) / partition : 1;
  if (parts <= 1) {
    plan->items.push_back({token, s, 0, context, -1});
    return;
  }
  const int32_t chunk = RoundUp((context + parts - 1) / parts, 16);
  SplitToken split{token, plan->num_partials, 0, 0};
  for (int32_t begin = 0; begin < context; begin += chunk) {
    plan->items.push_back(
        {token, s, begin, std::min(context, begin + chunk), plan->num_partials++});
    ++split.num_partials;
  }
  plan->splits.push_back(split);
}

}  // namespace

int32_t RoundUpPow2(int32_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return static_cast<int32_t>(std::min<int64_t>(p, INT32_MAX));  // n past 2^30: not a power
}

int32_t GraphBucket(int32_t n) {
  if (n <= 8) return RoundUpPow2(n);
  const int32_t step = RoundUpPow2(n) / 8;  // a quarter of the power of two below
  return RoundUp(n, step);
}

void PadPlanForGraphs(int32_t num_seqs, AttentionPlan* plan) {
  if (plan->splits.empty() || !plan->tiles.empty() ||
      plan->num_decode_items != static_cast<int32_t>(plan->items.size())) {
    return;
  }
  const auto items = static_cast<int32_t>(plan->items.size());
  const auto splits = static_cast<int32_t>(plan->splits.size());
  plan->padding_items = GraphBucket(items) - items;
  plan->padding_splits = std::max(0, num_seqs - splits);
  plan->items.resize(items + plan->padding_items, AttentionItem{-1, 0, 0, 0, -1});
  plan->splits.resize(splits + plan->padding_splits, SplitToken{-1, 0, 0, 0});
  plan->num_decode_items = static_cast<int32_t>(plan->items.size());
  plan->num_partials = static_cast<int32_t>(plan->items.size());  // >= the real ones
}

absl::StatusOr<AttentionPath> ChooseAttentionPath(const AttentionShape& s) {
  if (s.num_kv_heads <= 0 || s.num_heads <= 0 || s.num_heads % s.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda attention: ", s.num_heads, " query heads over ", s.num_kv_heads, " KV heads"));
  }
  if (!IsPowerOfTwo(s.block_size) || s.block_size > 256) {
    return absl::UnimplementedError(absl::StrCat("cuda attention: block_size ", s.block_size,
                                                 " unsupported (powers of two 1..256)"));
  }
  if (s.head_dim < 2 || s.head_dim > 256 || s.head_dim % 2 != 0) {
    return absl::UnimplementedError(absl::StrCat("cuda attention: head_dim ", s.head_dim,
                                                 " unsupported (even, 2..256; tensor cores: "
                                                 "64, 128)"));
  }
  // A cache of the activation type, or fp8 (converted while it is loaded).
  const bool tc_dtype = (s.dtype == DType::kBF16 || s.dtype == DType::kF16) &&
                        (s.kv_dtype == s.dtype || s.kv_dtype == DType::kF8E4M3);
  const bool tc_dim = s.head_dim == 64 || s.head_dim == 128;
  const bool tc_group = s.num_heads / s.num_kv_heads <= kMaxTensorCoreGroup;
  if (tc_dtype && tc_dim && tc_group && s.aligned && !s.force_generic) {
    return AttentionPath::kTensorCore;
  }
  return AttentionPath::kGeneric;
}

int32_t BlocksPerItem(AttentionPath path, int32_t num_heads, int32_t num_kv_heads) {
  if (path == AttentionPath::kTensorCore) {
    const int32_t group = num_heads / num_kv_heads;
    return num_kv_heads * ((group + 15) / 16);
  }
  return (num_heads + 3) / 4;  // four warps (heads) per block
}

int32_t ChooseSplitPartition(const std::vector<int32_t>& contexts, int32_t blocks_per_item,
                             int32_t num_sms) {
  if (contexts.empty() || blocks_per_item <= 0) return 0;
  const int64_t items = static_cast<int64_t>(contexts.size());
  if (items * blocks_per_item >= num_sms) return 0;  // a full wave without splitting
  int64_t total = 0;
  int32_t longest = 0;
  for (int32_t c : contexts) {
    total += c;
    longest = std::max(longest, c);
  }
  const int64_t target_items = (2 * int64_t{num_sms} + blocks_per_item - 1) / blocks_per_item;
  const int64_t wanted =
      std::max<int64_t>({kMinPartition, (total + target_items - 1) / target_items,
                         (longest + kMaxPartitions - 1) / kMaxPartitions});
  int64_t partition = kMinPartition;
  while (partition < wanted) partition *= 2;
  return partition >= longest ? 0 : static_cast<int32_t>(partition);
}

absl::StatusOr<AttentionPlan> BuildAttentionPlan(const BatchInput& batch,
                                                 const AttentionPlanOptions& o) {
  AttentionPlan plan;
  const bool tc = o.path == AttentionPath::kTensorCore;
  // Decode sequences (one query token) and their contexts.
  std::vector<int32_t> decode_tokens;
  std::vector<int32_t> decode_seqs;
  std::vector<int32_t> contexts;
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t begin = batch.query_start_loc[s];
    const int32_t end = batch.query_start_loc[s + 1];
    for (int32_t i = begin; i < end; ++i) {
      if (batch.positions[i] < 0) return absl::InvalidArgumentError("cuda attention: position < 0");
    }
    if (end > begin) {
      const int32_t last =
          *std::max_element(batch.positions.begin() + begin, batch.positions.begin() + end);
      if (absl::Status st = CheckBlockTable(batch, s, last + 1, o); !st.ok()) return st;
    }
    if (end - begin == 1) {
      decode_tokens.push_back(begin);
      decode_seqs.push_back(s);
      contexts.push_back(batch.positions[begin] + 1);
    }
  }
  plan.partition_size =
      o.split_partition < 0
          ? ChooseSplitPartition(contexts, BlocksPerItem(o.path, o.num_heads, o.num_kv_heads),
                                 o.num_sms)
          : RoundUp(o.split_partition, 16);
  for (size_t i = 0; i < decode_tokens.size(); ++i) {
    AddDecodeItems(decode_tokens[i], decode_seqs[i], contexts[i], plan.partition_size, &plan);
  }
  if (plan.splits.empty()) plan.partition_size = 0;
  plan.num_decode_items = static_cast<int32_t>(plan.items.size());

  // Prefill sequences: one item per token (generic) or tiles of consecutive tokens.
  const int32_t group = o.num_heads / o.num_kv_heads;
  const int32_t tile_tokens = std::max(1, kPrefillTileRows / group);
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t begin = batch.query_start_loc[s];
    const int32_t end = batch.query_start_loc[s + 1];
    if (end - begin < 2) continue;
    for (int32_t i = begin; i < end; i += tc ? tile_tokens : 1) {
      if (!tc) {
        plan.items.push_back({i, s, 0, batch.positions[i] + 1, -1});
        continue;
      }
      const int32_t n = std::min(tile_tokens, end - i);
      const int32_t last =
          *std::max_element(batch.positions.begin() + i, batch.positions.begin() + i + n);
      plan.tiles.push_back({s, i, n, last + 1});
    }
  }
  return plan;
}

}  // namespace pagoda::kernels::cuda
