// kernels/cpu: Highway SIMD kernels, each tested against its kernels/reference twin.
#pragma once

#include "runtime/core/status.h"
#include "runtime/kernel/kernel_registry.h"

namespace ember::kernels {

// Registers every cpu kernel (library name "cpu"). Fails on a duplicate key.
Status register_cpu_kernels(KernelRegistry& registry);

}  // namespace ember::kernels
