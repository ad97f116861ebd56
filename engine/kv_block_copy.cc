#include "engine/kv_block_copy.h"

#include <vector>

#include "common/status_macros.h"

namespace pagoda::engine {
namespace {

// Copies `bytes` at byte offset `src` of `plane` to byte offset `dst` through `staging`.
absl::Status CopyRange(kernels::Backend& backend, char* plane, size_t src, size_t dst, size_t bytes,
                       std::vector<char>& staging) {
  staging.resize(bytes);
  RETURN_IF_ERROR(backend.CopyToHost(staging.data(), plane + src, bytes));
  return backend.CopyToDevice(plane + dst, staging.data(), bytes);
}

}  // namespace

absl::Status CopyKvBlocks(kernels::Backend& backend, const kernels::PagedKvCache& cache,
                          absl::Span<const BlockCopy> copies) {
  const kernels::KvCacheShape& s = cache.shape;
  const size_t data_bytes =
      static_cast<size_t>(int64_t{s.block_size} * s.token_elems()) * kernels::DTypeSize(s.dtype);
  // kI8 parameters (kernels/kv_cache.h): K's step and offset per block, head and channel;
  // V's scale per token and head.
  const size_t k_param_bytes = static_cast<size_t>(s.num_kv_heads) * 2 * s.head_dim * sizeof(float);
  const size_t v_scale_bytes = static_cast<size_t>(s.block_size) * s.num_kv_heads * sizeof(float);
  std::vector<char> staging;
  for (const BlockCopy& c : copies) {
    for (int32_t layer = 0; layer < s.num_layers; ++layer) {
      for (int32_t kind = 0; kind < 2; ++kind) {
        char* plane = static_cast<char*>(cache.Plane(layer, kind));
        RETURN_IF_ERROR(
            CopyRange(backend, plane, c.src * data_bytes, c.dst * data_bytes, data_bytes, staging));
      }
      if (!s.has_scales()) continue;
      char* k_params = reinterpret_cast<char*>(cache.KParams(layer));
      RETURN_IF_ERROR(CopyRange(backend, k_params, c.src * k_param_bytes, c.dst * k_param_bytes,
                                k_param_bytes, staging));
      char* v_scales = reinterpret_cast<char*>(cache.VScales(layer));
      RETURN_IF_ERROR(CopyRange(backend, v_scales, c.src * v_scale_bytes, c.dst * v_scale_bytes,
                                v_scale_bytes, staging));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagoda::engine
