// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; the
// Random123 constants and round structure): a counter-based generator, so a value depends only on
// (key, counter), never on call order, batch composition or threads. Used by the `sample` op:
// key = {seed, 0}, counter = {position, 0, 0, 0}. Header-only, no state.
#pragma once

#include <cstdint>

namespace ember {

struct Philox4x32 {
  uint32_t v[4];
};

// The 10-round Philox4x32 block of `counter` under `key`.
inline Philox4x32 philox4x32_10(const uint32_t counter[4], const uint32_t key[2]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += kW0, k1 += kW1;
  }
  return Philox4x32{{c0, c1, c2, c3}};
}

// The `sample` op's uniform draw in [0, 1) for (seed, position): the first two words of the block
// as a 53-bit fraction, (v0 << 21 | v1 >> 11) * 2^-53.
inline double sample_uniform(uint32_t seed, uint32_t position) {
  const uint32_t counter[4] = {position, 0u, 0u, 0u};
  const uint32_t key[2] = {seed, 0u};
  const Philox4x32 r = philox4x32_10(counter, key);
  const uint64_t bits = (static_cast<uint64_t>(r.v[0]) << 21) | (r.v[1] >> 11);
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

}  // namespace ember
