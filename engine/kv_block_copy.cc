#include "engine/kv_block_copy.h"

#include <vector>

#include "common/status_macros.h"

namespace pagoda::engine {
namespace {

// Copies `count` blocks of `bytes_per_block` bytes each, starting at block `first.src` of
// `src` to block `first.dst` of `dst` (both the start of a per-layer array indexed by block).
absl::Status CopyBlocks(kernels::Backend& backend, const BlockCopy& first, int32_t count,
                        size_t bytes_per_block, const char* src, char* dst,
                        std::vector<char>& staging) {
  const size_t bytes = bytes_per_block * count;
  const char* from = src + first.src * bytes_per_block;
  char* to = dst + first.dst * bytes_per_block;
  if (first.kind != CopyKind::kDevice) {
    return backend.CopyHostAsync(to, from, bytes, first.kind == CopyKind::kToHost);
  }
  staging.resize(bytes);
  RETURN_IF_ERROR(backend.CopyToHost(staging.data(), from, bytes));
  return backend.CopyToDevice(to, staging.data(), bytes);
}

// Copies a run of `count` blocks starting with `first`.
absl::Status CopyRun(kernels::Backend& backend, const kernels::PagedKvCache& cache,
                     const kernels::PagedKvCache& swap, const BlockCopy& first, int32_t count,
                     std::vector<char>& staging) {
  const kernels::PagedKvCache& from = first.kind == CopyKind::kFromHost ? swap : cache;
  const kernels::PagedKvCache& to = first.kind == CopyKind::kToHost ? swap : cache;
  const kernels::KvCacheShape& s = cache.shape;
  const size_t data_bytes =
      static_cast<size_t>(int64_t{s.block_size} * s.token_elems()) * kernels::DTypeSize(s.dtype);
  // kI8 scales (kernels/kv_cache.h): one per token and head, of K and of V.
  const size_t scale_bytes = static_cast<size_t>(s.block_size) * s.num_kv_heads * sizeof(float);
  for (int32_t layer = 0; layer < s.num_layers; ++layer) {
    for (int32_t kind = 0; kind < 2; ++kind) {
      RETURN_IF_ERROR(CopyBlocks(backend, first, count, data_bytes,
                                 static_cast<const char*>(from.Plane(layer, kind)),
                                 static_cast<char*>(to.Plane(layer, kind)), staging));
      if (!s.has_scales()) continue;
      RETURN_IF_ERROR(CopyBlocks(backend, first, count, scale_bytes,
                                 reinterpret_cast<const char*>(from.Scales(layer, kind)),
                                 reinterpret_cast<char*>(to.Scales(layer, kind)), staging));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CopyKvBlocks(kernels::Backend& backend, const kernels::PagedKvCache& cache,
                          const kernels::PagedKvCache& swap, absl::Span<const BlockCopy> copies) {
  std::vector<char> staging;
  size_t i = 0;
  while (i < copies.size()) {
    size_t j = i + 1;
    while (j < copies.size() && copies[j].kind == copies[i].kind &&
           copies[j].src == copies[j - 1].src + 1 && copies[j].dst == copies[j - 1].dst + 1) {
      ++j;
    }
    RETURN_IF_ERROR(CopyRun(backend, cache, swap, copies[i], static_cast<int32_t>(j - i), staging));
    i = j;
  }
  return absl::OkStatus();
}

}  // namespace pagoda::engine
