// Copies whole KV blocks (every layer, K and V, int8 scales included) inside the paged
// cache: the copy half of copy on write.
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/kv_cache_manager.h"
#include "kernels/backend.h"
#include "kernels/kv_cache.h"

namespace pagoda::engine {

// Copies each block `src` of `cache` into its `dst`, in order, through host memory (a
// backend-neutral path; copies are rare: one per forked sample). The backend's error
// otherwise.
absl::Status CopyKvBlocks(kernels::Backend& backend, const kernels::PagedKvCache& cache,
                          absl::Span<const BlockCopy> copies);

}  // namespace pagoda::engine
