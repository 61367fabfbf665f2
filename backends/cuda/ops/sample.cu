// Stub: replaced by the sampling kernel.
#include "backends/cuda/ops/cuda_ops.h"

namespace ember::backends::cuda {
EMBER_CUDA_KERNEL(sample) { record_failure(launch_context(ctx), "sample", "not implemented"); }
EMBER_CUDA_SCRATCH(sample_scratch) { return 0; }
}  // namespace ember::backends::cuda
