// Layout of the paged KV cache: one allocation holding K and V of every layer.
//
//   [num_layers][2 (K=0, V=1)][num_blocks][block_size][num_kv_heads][head_dim]
//
// A slot is a (block, offset) pair flattened as slot = block * block_size + offset. Token t
// of a sequence with block table T lives at slot T[t / block_size] * block_size +
// t % block_size, so the K vector of that token for layer l and KV head h starts at element
//   ((l * 2 + 0) * num_blocks * block_size + slot) * num_kv_heads * head_dim + h * head_dim
// and its V vector at the same place with (l * 2 + 1). NHD inside a block keeps one token's
// heads adjacent, so writing a new token is one contiguous store per layer.
//
// With dtype kI8 the data are int8 codes and float scales follow all the data:
//   K scales  [num_layers][num_blocks * block_size][num_kv_heads]
//   V scales  [num_layers][num_blocks * block_size][num_kv_heads]
// per token and head a step s (x ~= code * s, s = max|x| / 127). A token's codes depend on
// that token alone, never on which tokens were written with it or after it, so the cache's
// contents do not depend on how prompts were chunked (batch invariance). (Per-channel ranges
// over a block, KIVI-style, fit keys better but change as the block fills.)
// kernels/cpu/kv_int8.h stores and reads these. Copying a block (copy on write, swap) must copy
// its slots' scales with its codes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/tensor.h"

namespace pagoda::kernels {

struct KvCacheShape {
  int32_t num_layers = 0;
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  DType dtype = DType::kF32;
  // kF8E4M3 only: the per-tensor scale; an element stored as e4m3 value v stands for
  // v * fp8_scale (1 keeps K/V within e4m3's +-448 for typical models, uncalibrated).
  float fp8_scale = 1.f;

  // Elements of one token's K (or V) in one layer.
  int64_t token_elems() const { return int64_t{num_kv_heads} * head_dim; }
  // Elements of all of K (or V) in one layer.
  int64_t plane_elems() const { return int64_t{num_blocks} * block_size * token_elems(); }
  // True when the data carry float parameters after them (kI8).
  bool has_scales() const { return dtype == DType::kI8; }
  // Floats of K (or V) scales of one layer (0 without scales).
  int64_t scale_plane_elems() const {
    return has_scales() ? int64_t{num_blocks} * block_size * num_kv_heads : 0;
  }
  // Bytes of the K and V values of every layer (parameters excluded).
  size_t data_bytes() const {
    return static_cast<size_t>(2 * num_layers * plane_elems()) * DTypeSize(dtype);
  }
  // Bytes of the whole cache, parameters included.
  size_t total_bytes() const {
    return data_bytes() + static_cast<size_t>(2 * num_layers * scale_plane_elems()) * sizeof(float);
  }
  // Bytes one block takes across all layers, K and V, parameters included.
  size_t bytes_per_block() const {
    const int64_t data =
        2 * int64_t{block_size} * token_elems() * static_cast<int64_t>(DTypeSize(dtype));
    const int64_t params =
        has_scales() ? 2 * int64_t{block_size} * num_kv_heads * static_cast<int64_t>(sizeof(float))
                     : 0;
    return static_cast<size_t>(num_layers * (data + params));
  }
};

// A view of the cache memory (owned elsewhere) with its shape. Trivially copyable, so it
// can be passed by value to device kernels.
struct PagedKvCache {
  void* data = nullptr;
  KvCacheShape shape;

  // Start of K (kind 0) or V (kind 1) of `layer`: [num_blocks * block_size][kv_heads][head_dim].
  void* Plane(int32_t layer, int32_t kind) const {
    return static_cast<char*>(data) +
           static_cast<size_t>((int64_t{layer} * 2 + kind) * shape.plane_elems()) *
               DTypeSize(shape.dtype);
  }
  // Scales of K (kind 0) or V (kind 1) of `layer` (kI8 only): [num_blocks * block_size][kv_heads].
  float* Scales(int32_t layer, int32_t kind) const {
    return reinterpret_cast<float*>(static_cast<char*>(data) + shape.data_bytes()) +
           (int64_t{layer} * 2 + kind) * shape.scale_plane_elems();
  }
};

}  // namespace pagoda::kernels
