#include "engine/prefix_hash.h"

#include <random>
#include <vector>

namespace pagoda::engine {
namespace {

constexpr uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct SipState {
  uint64_t v0, v1, v2, v3;

  SipState(uint64_t k0, uint64_t k1)
      : v0(k0 ^ 0x736f6d6570736575ull),
        v1(k1 ^ 0x646f72616e646f6dull),
        v2(k0 ^ 0x6c7967656e657261ull),
        v3(k1 ^ 0x7465646279746573ull) {}

  void Round() {
    v0 += v1;
    v1 = Rotl(v1, 13);
    v1 ^= v0;
    v0 = Rotl(v0, 32);
    v2 += v3;
    v3 = Rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = Rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = Rotl(v1, 17);
    v1 ^= v2;
    v2 = Rotl(v2, 32);
  }

  void Absorb(uint64_t m) {
    v3 ^= m;
    Round();
    Round();
    v0 ^= m;
  }

  uint64_t Finish() {
    v2 ^= 0xff;
    for (int i = 0; i < 4; ++i) Round();
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

// SipHash-2-4 of `words` (little-endian 64-bit words) followed by the length block.
uint64_t Sip(uint64_t k0, uint64_t k1, absl::Span<const uint64_t> words, uint64_t num_bytes) {
  SipState s(k0, k1);
  for (uint64_t w : words) s.Absorb(w);
  s.Absorb(num_bytes << 56);
  return s.Finish();
}

}  // namespace

std::string PrefixSalt(std::string_view model, std::string_view tenant,
                       std::string_view request_salt) {
  std::string out(model);
  out += std::to_string(tenant.size()) + ":";
  out += tenant;
  out += std::to_string(request_salt.size()) + ":";
  out += request_salt;
  return out;
}

PrefixHasher::PrefixHasher() {
  std::random_device rd;
  k0_ = (uint64_t{rd()} << 32) ^ rd();
  k1_ = (uint64_t{rd()} << 32) ^ rd();
}

PrefixHasher::PrefixHasher(uint64_t k0, uint64_t k1) : k0_(k0), k1_(k1) {}

BlockHash PrefixHasher::Hash(absl::Span<const uint64_t> words, uint64_t num_bytes) const {
  // Two keys derived from one: the halves are independent PRF outputs.
  return BlockHash{.hi = Sip(k0_, k1_, words, num_bytes),
                   .lo = Sip(k1_ ^ 0x9E3779B97F4A7C15ull, k0_, words, num_bytes)};
}

BlockHash PrefixHasher::Root(std::string_view salt) const {
  // A domain tag word first, so a root never equals a block hash of the same words.
  std::vector<uint64_t> words = {0x726f6f74ull};
  for (size_t i = 0; i < salt.size(); i += 8) {
    uint64_t w = 0;
    for (size_t j = 0; j < 8 && i + j < salt.size(); ++j) {
      w |= uint64_t{static_cast<unsigned char>(salt[i + j])} << (8 * j);
    }
    words.push_back(w);
  }
  return Hash(words, 8 + salt.size());
}

BlockHash PrefixHasher::Next(const BlockHash& parent, absl::Span<const int32_t> tokens) const {
  std::vector<uint64_t> words = {0x626c6f636bull, parent.hi, parent.lo};
  words.reserve(3 + (tokens.size() + 1) / 2);
  for (size_t i = 0; i < tokens.size(); i += 2) {
    uint64_t w = static_cast<uint32_t>(tokens[i]);
    if (i + 1 < tokens.size()) w |= uint64_t{static_cast<uint32_t>(tokens[i + 1])} << 32;
    words.push_back(w);
  }
  return Hash(words, 24 + 4 * tokens.size());
}

}  // namespace pagoda::engine
