// Stub: replaced by the paged attention kernels.
#include "backends/cuda/ops/cuda_ops.h"

namespace ember::backends::cuda {
EMBER_CUDA_KERNEL(paged_attention) { record_failure(launch_context(ctx), "paged_attention", "not implemented"); }
EMBER_CUDA_SCRATCH(paged_attention_scratch) { return 0; }
}  // namespace ember::backends::cuda
