#include "kernels/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace pagoda::kernels::cpu {
namespace {

// Work below this many multiply-adds runs on the calling thread: waking workers costs more.
constexpr int64_t kMinParallelWork = 1 << 15;

float Dot(const float* a, const float* b, int32_t n) {
  float sum = 0.f;
  for (int32_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Sequence index of every batch token, from query_start_loc.
std::vector<int32_t> SequenceOfToken(const BatchInput& batch) {
  std::vector<int32_t> seq_of(batch.num_tokens());
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    for (int32_t i = batch.query_start_loc[s]; i < batch.query_start_loc[s + 1]; ++i) {
      seq_of[i] = s;
    }
  }
  return seq_of;
}

}  // namespace

void WriteKv(const BatchInput& batch, const Tensor& k, const Tensor& v, const PagedKvCache& cache,
             int32_t layer, ThreadPool* pool) {
  const int64_t width = cache.shape.token_elems();
  auto* k_plane = static_cast<float*>(cache.Plane(layer, 0));
  auto* v_plane = static_cast<float*>(cache.Plane(layer, 1));
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
  for (int32_t i = 0; i < batch.num_tokens(); ++i) {
    const int32_t slot = batch.slot_mapping[i];
    if (slot < 0) continue;
    std::memcpy(k_plane + slot * width, k.row<float>(i), row_bytes);
    std::memcpy(v_plane + slot * width, v.row<float>(i), row_bytes);
  }
}

void PagedAttention(const BatchInput& batch, const Tensor& q, const PagedKvCache& cache,
                    int32_t layer, const AttentionParams& params, const Tensor& out,
                    ThreadPool* pool) {
  const int32_t num_tokens = batch.num_tokens();
  const int32_t kv_heads = params.num_kv_heads;
  const int32_t group = params.num_heads / kv_heads;
  const int32_t head_dim = params.head_dim;
  const int32_t block_size = cache.shape.block_size;
  const int64_t kv_width = cache.shape.token_elems();
  const auto* k_plane = static_cast<const float*>(cache.Plane(layer, 0));
  const auto* v_plane = static_cast<const float*>(cache.Plane(layer, 1));
  const std::vector<int32_t> seq_of = SequenceOfToken(batch);

  int64_t work = 0;
  for (int32_t i = 0; i < num_tokens; ++i) work += int64_t{batch.positions[i] + 1};
  work *= int64_t{params.num_heads} * head_dim * 2;
  const int64_t items = int64_t{num_tokens} * kv_heads;
  const int64_t grain = work < kMinParallelWork ? items : 1;

  // One item is (query token i, KV head g): the `group` query heads that share KV head g
  // read each cached K/V row once.
  pool->ParallelFor(items, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      const int32_t i = static_cast<int32_t>(item / kv_heads);
      const int32_t g = static_cast<int32_t>(item % kv_heads);
      const int32_t s = seq_of[i];
      const int32_t ctx = batch.positions[i] + 1;
      const int32_t* table =
          batch.block_tables.data() + static_cast<int64_t>(s) * batch.max_blocks_per_seq;
      const float* q_row = q.row<float>(i) + static_cast<int64_t>(g) * group * head_dim;
      float* out_row = out.row<float>(i) + static_cast<int64_t>(g) * group * head_dim;
      scores.assign(static_cast<size_t>(group) * ctx, 0.f);

      for (int32_t t = 0; t < ctx; ++t) {
        const int64_t slot = int64_t{table[t / block_size]} * block_size + t % block_size;
        const float* k_row = k_plane + slot * kv_width + int64_t{g} * head_dim;
        for (int32_t h = 0; h < group; ++h) {
          scores[h * ctx + t] = Dot(q_row + h * head_dim, k_row, head_dim) * params.scale;
        }
      }
      for (int32_t h = 0; h < group; ++h) {
        float* sc = scores.data() + static_cast<size_t>(h) * ctx;
        const float max = *std::max_element(sc, sc + ctx);
        double sum = 0;
        for (int32_t t = 0; t < ctx; ++t) {
          sc[t] = std::exp(sc[t] - max);
          sum += sc[t];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int32_t t = 0; t < ctx; ++t) sc[t] *= inv;
        std::fill(out_row + h * head_dim, out_row + (h + 1) * head_dim, 0.f);
      }
      for (int32_t t = 0; t < ctx; ++t) {
        const int64_t slot = int64_t{table[t / block_size]} * block_size + t % block_size;
        const float* v_row = v_plane + slot * kv_width + int64_t{g} * head_dim;
        for (int32_t h = 0; h < group; ++h) {
          const float p = scores[h * ctx + t];
          float* o = out_row + h * head_dim;
          for (int32_t d = 0; d < head_dim; ++d) o[d] += p * v_row[d];
        }
      }
    }
  });
}

}  // namespace pagoda::kernels::cpu
