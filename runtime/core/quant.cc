#include "runtime/core/quant.h"

#include <cstring>

#include "runtime/core/float_codecs.h"

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

Status check_nvfp4_global_scale(float global_scale, ErrorContext* ctx) {
  if (!nvfp4_global_scale_is_valid(global_scale)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "NVFP4 global scale %g must be finite and greater than 0",
                      static_cast<double>(global_scale));
  }
  return Status::ok();
}

Status check_ue4m3_scales(const uint8_t* scales, int64_t rows, int64_t cols, ErrorContext* ctx) {
  for (int64_t s = 0; s < rows * cols; ++s) {
    if (!ue4m3_is_valid(scales[s])) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "NVFP4 block scale [%lld, %lld] is 0x%02x, not a valid ue4m3 code (sign bit set or 0x7F)",
                        static_cast<long long>(s / cols), static_cast<long long>(s % cols),
                        static_cast<unsigned>(scales[s]));
    }
  }
  return Status::ok();
}

}  // namespace ember
