// Stub: replaced by the elementwise kernels (embedding, rms_norm, rope, silu_mul, add, reshape,
// logits_gather).
#include "backends/cuda/ops/cuda_ops.h"

namespace ember::backends::cuda {
#define EMBER_CUDA_STUB(name) \
  EMBER_CUDA_KERNEL(name) { record_failure(launch_context(ctx), #name, "not implemented"); }
EMBER_CUDA_STUB(embedding)
EMBER_CUDA_STUB(rms_norm)
EMBER_CUDA_STUB(rope)
EMBER_CUDA_STUB(silu_mul)
EMBER_CUDA_STUB(add)
EMBER_CUDA_STUB(reshape)
EMBER_CUDA_STUB(logits_gather)
}  // namespace ember::backends::cuda
