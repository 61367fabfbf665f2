// kernels/reference: scalar, obviously-correct kernels; the numerical oracle for every backend.
#pragma once

#include "runtime/core/status.h"
#include "runtime/kernel/kernel_registry.h"

namespace ember::kernels {

// Registers every reference kernel (library name "reference"). With only_missing, keys already
// present are skipped instead of failing.
Status register_reference_kernels(KernelRegistry& registry, bool only_missing = false);

}  // namespace ember::kernels
