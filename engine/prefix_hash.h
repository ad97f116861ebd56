// Hashes that name the contents of full KV blocks for the prefix cache. A block's hash is
// chained from its parent's (the block before it in the sequence), so equal hashes mean
// equal token prefixes under an equal salt. The first block's parent is the root hash of
// the salt (model, tenant and the request's own cache_salt), so different tenants, or
// salts, never share a block.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/types/span.h"

namespace pagoda::engine {

// 128 bits: collisions are negligible at any cache size.
struct BlockHash {
  uint64_t hi = 0;
  uint64_t lo = 0;

  friend bool operator==(const BlockHash& a, const BlockHash& b) = default;
  template <typename H>
  friend H AbslHashValue(H h, const BlockHash& b) {
    return H::combine(std::move(h), b.hi, b.lo);
  }
};

// The salt of a request's root hash: the model's (`model`: architecture, shapes, KV type),
// its tenant's and its own (GenerationRequest::cache_salt, "" for none), each length-prefixed
// so no two (tenant, salt) pairs give one salt.
std::string PrefixSalt(std::string_view model, std::string_view tenant,
                       std::string_view request_salt);

// Keyed SipHash-2-4 (run twice for 128 bits). The key is secret and random per process, so
// no client can craft token ids whose hash collides with another prompt's.
class PrefixHasher {
 public:
  // A hasher with a random key.
  PrefixHasher();
  // A hasher with the given key (tests: reproducible hashes).
  PrefixHasher(uint64_t k0, uint64_t k1);

  // The hash standing for "no block yet" under `salt`.
  BlockHash Root(std::string_view salt) const;
  // The hash of a block holding `tokens` whose parent block hashes to `parent`.
  BlockHash Next(const BlockHash& parent, absl::Span<const int32_t> tokens) const;

 private:
  BlockHash Hash(absl::Span<const uint64_t> words, uint64_t num_bytes) const;

  uint64_t k0_, k1_;
};

}  // namespace pagoda::engine
