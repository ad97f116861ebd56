#include "engine/kv_block_copy.h"

#include <vector>

#include "common/status_macros.h"

namespace pagoda::engine {
namespace {

// The byte ranges of a run of `count` blocks starting with `first`: per layer, K and V (and
// their kI8 scales), each one range from block `first.src` of its plane to `first.dst`.
// Appended to `out`.
void RunRanges(const kernels::PagedKvCache& cache, const kernels::PagedKvCache& swap,
               const BlockCopy& first, int32_t count, std::vector<kernels::HostCopy>& out) {
  const kernels::PagedKvCache& from = first.kind == CopyKind::kFromHost ? swap : cache;
  const kernels::PagedKvCache& to = first.kind == CopyKind::kToHost ? swap : cache;
  const kernels::KvCacheShape& s = cache.shape;
  const size_t data_bytes =
      static_cast<size_t>(int64_t{s.block_size} * s.token_elems()) * kernels::DTypeSize(s.dtype);
  // kI8 scales (kernels/kv_cache.h): one per token and head, of K and of V.
  const size_t scale_bytes = static_cast<size_t>(s.block_size) * s.num_kv_heads * sizeof(float);
  const auto add = [&](const void* src_plane, void* dst_plane, size_t bytes_per_block) {
    out.push_back({.dst = static_cast<char*>(dst_plane) + first.dst * bytes_per_block,
                   .src = static_cast<const char*>(src_plane) + first.src * bytes_per_block,
                   .bytes = bytes_per_block * count});
  };
  for (int32_t layer = 0; layer < s.num_layers; ++layer) {
    for (int32_t kind = 0; kind < 2; ++kind) {
      add(from.Plane(layer, kind), to.Plane(layer, kind), data_bytes);
      if (s.has_scales()) add(from.Scales(layer, kind), to.Scales(layer, kind), scale_bytes);
    }
  }
}

}  // namespace

absl::Status CopyKvBlocks(kernels::Backend& backend, const kernels::PagedKvCache& cache,
                          const kernels::PagedKvCache& swap, absl::Span<const BlockCopy> copies) {
  std::vector<kernels::HostCopy> ranges;
  std::vector<char> staging;
  size_t i = 0;
  while (i < copies.size()) {
    // A segment of copies of one kind; runs of consecutive source and destination blocks in
    // it become one range per layer, K and V.
    const CopyKind kind = copies[i].kind;
    ranges.clear();
    while (i < copies.size() && copies[i].kind == kind) {
      size_t j = i + 1;
      while (j < copies.size() && copies[j].kind == kind &&
             copies[j].src == copies[j - 1].src + 1 && copies[j].dst == copies[j - 1].dst + 1) {
        ++j;
      }
      RunRanges(cache, swap, copies[i], static_cast<int32_t>(j - i), ranges);
      i = j;
    }
    if (kind != CopyKind::kDevice) {
      // The blocks of one direction are distinct, so the ranges may run in any order.
      RETURN_IF_ERROR(backend.CopyHostBatchAsync(ranges, kind == CopyKind::kToHost));
      continue;
    }
    // Inside the cache: through host memory, in order (a backend-neutral path; rare, one per
    // forked sample).
    for (const kernels::HostCopy& r : ranges) {
      staging.resize(r.bytes);
      RETURN_IF_ERROR(backend.CopyToHost(staging.data(), r.src, r.bytes));
      RETURN_IF_ERROR(backend.CopyToDevice(r.dst, staging.data(), r.bytes));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagoda::engine
