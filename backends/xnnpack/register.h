// The XNNPACK backend: runs GRAPH delegates of CNN-style f32 ops (conv2d, pools, linear, elementwise,
// softmax, reshape) through one XNNPACK runtime per delegate, in NHWC inside, NCHW at its edges
// (backends/xnnpack/README.md). A host backend: it owns no program state and takes host memory only.
#pragma once

#include "runtime/backend/backend.h"

namespace ember::backends::xnnpack {

constexpr const char* kBackendId = "xnnpack";

// Adds the backend under "xnnpack". No static initializers: call it once at start-up.
Status register_backend(BackendRegistry& registry);

}  // namespace ember::backends::xnnpack
