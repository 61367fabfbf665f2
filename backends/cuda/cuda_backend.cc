#include "backends/cuda/register.h"

namespace ember::backends::cuda {
Status register_backend(BackendRegistry& registry) { return Status::ok(); }
}  // namespace ember::backends::cuda
