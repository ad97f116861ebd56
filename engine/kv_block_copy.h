// Copies whole KV blocks (every layer, K and V, int8 parameters included): inside the paged
// cache (the copy half of copy on write) and between it and the host swap space (swap
// preemption).
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/kv_cache_manager.h"
#include "kernels/backend.h"
#include "kernels/kv_cache.h"

namespace pagoda::engine {

// Runs `copies` in order: kDevice ones inside `cache` through host memory (a backend-neutral
// path; they are rare: one per forked sample), kToHost/kFromHost ones between `cache` and
// `swap` (the same shape but for its block count, in Backend::AllocateHost memory) queued
// with Backend::CopyHostBatchAsync, one batch per stretch of copies in one direction. Runs of
// consecutive source and destination blocks are copied as one range per layer, K and V.
// The backend's error otherwise.
absl::Status CopyKvBlocks(kernels::Backend& backend, const kernels::PagedKvCache& cache,
                          const kernels::PagedKvCache& swap, absl::Span<const BlockCopy> copies);

}  // namespace pagoda::engine
