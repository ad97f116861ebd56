// Rotary position embedding on the CPU, with exactly the float arithmetic of ggml's CPU
// rope (the numbers llama.cpp's references were made with).
#pragma once

#include "common/thread_pool.h"
#include "kernels/backend.h"

namespace pagoda::kernels::cpu {

// Rotates q and k in place by batch.positions as Backend::Rope describes. q, k have
// batch.num_tokens() rows (or fewer); params.freq_factors, when present, is host memory.
void Rope(const BatchInput& batch, const Tensor& q, const Tensor& k, const RopeParams& params,
          ThreadPool* pool);

}  // namespace pagoda::kernels::cpu
