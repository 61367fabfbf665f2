// Stub: replaced by the linear kernels (GEMV, dequantization, cuBLASLt).
#include "backends/cuda/ops/cuda_ops.h"

namespace ember::backends::cuda {
struct GemmCache {};
GemmCache* gemm_cache_create() { return new GemmCache(); }
void gemm_cache_destroy(GemmCache* cache) { delete cache; }
EMBER_CUDA_KERNEL(linear) { record_failure(launch_context(ctx), "linear", "not implemented"); }
EMBER_CUDA_SCRATCH(linear_scratch) { return 0; }
}  // namespace ember::backends::cuda
