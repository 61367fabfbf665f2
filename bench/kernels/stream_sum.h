// The read-only roofline for the quantized GEMV benchmark: a vectorized sum of bytes (Highway,
// dynamic dispatch), which streams memory as fast as one thread can read it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::bench {

// Σ p[i] for i < count, as u8 values summed into 64 bits.
uint64_t sum_bytes(const uint8_t* p, size_t count);

}  // namespace ember::bench
