// Matrix products with weights kept in 16-bit or ggml block formats on the CPU, computed as
// ggml's CPU backend does so results match llama.cpp: activations quantized once per call
// to the weight's vec_dot type, then block-wise integer dot products (kernels/quant).
#pragma once

#include <cstdint>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/tensor.h"

namespace pagoda::kernels::cpu {

// out[n, m] = x[n, k] * w[m, k]^T for w of any non-f32 weight dtype; x, out f32 (strided
// views allowed). `scratch` holds the quantized activations and only grows. Output columns
// are split across `pool` when the product is large.
void QuantMatMul(const Tensor& x, const Tensor& w, const Tensor& out, std::vector<uint8_t>* scratch,
                 ThreadPool* pool);

}  // namespace pagoda::kernels::cpu
