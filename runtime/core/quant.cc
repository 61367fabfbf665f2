#include "runtime/core/quant.h"

#include <cstring>

namespace ember {

const char* to_string(QuantLayout layout) {
  switch (layout) {
    case QuantLayout::None: return "none";
    case QuantLayout::PerTensor: return "per_tensor";
    case QuantLayout::PerChannel: return "per_channel";
    case QuantLayout::Block2d: return "block2d";
    case QuantLayout::Mx: return "mx";
    case QuantLayout::Nvfp4: return "nvfp4";
  }
  return "none";
}

bool e4m3_any_nan_code(const uint8_t* codes, size_t count) {
  // A byte's low seven bits are all ones exactly when adding 1 to them carries into bit 7.
  constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7Full, kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  uint64_t any = 0;
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {  // four independent words per iteration
    uint64_t w[4];
    std::memcpy(w, codes + i, sizeof(w));
    any |= ((w[0] & kLow7) + kOnes) | ((w[1] & kLow7) + kOnes) | ((w[2] & kLow7) + kOnes) |
           ((w[3] & kLow7) + kOnes);
  }
  for (; i + 8 <= count; i += 8) {
    uint64_t w;
    std::memcpy(&w, codes + i, sizeof(w));
    any |= (w & kLow7) + kOnes;
  }
  if ((any & kHigh) != 0) return true;
  for (; i < count; ++i) {
    if ((codes[i] & 0x7F) == 0x7F) return true;
  }
  return false;
}

}  // namespace ember
