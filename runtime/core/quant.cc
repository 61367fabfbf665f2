#include "runtime/core/quant.h"

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

}  // namespace ember
