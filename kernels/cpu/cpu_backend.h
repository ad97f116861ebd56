// The CPU backend: fp32 everywhere, OpenBLAS for matrix products, a thread pool for the
// rest. It is also the numerical reference the CUDA kernels are tested against.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace pagoda::kernels {

// A CPU backend using `options.num_threads` threads (0 = all hardware threads).
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const BackendOptions& options);

}  // namespace pagoda::kernels
