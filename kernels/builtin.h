// The portable kernel set every program can run on: kernels/cpu (Highway) where it has a kernel,
// kernels/reference for the rest. Registration is explicit: no static initializers.
#pragma once

#include "runtime/core/status.h"
#include "runtime/kernel/kernel_registry.h"

namespace ember {

// Adds the cpu kernels, then the reference kernels for keys the cpu library lacks.
Status register_builtin(KernelRegistry& registry);

}  // namespace ember
