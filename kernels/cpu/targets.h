// Which SIMD target the cpu kernels run: Highway picks the best one this CPU supports; an app (or
// `runner --cpu-target`) may cap it, e.g. to measure the AVX2 code on an AVX-512 machine.
#pragma once

#include <cstddef>

#include "runtime/core/status.h"

namespace ember::kernels {

// The target the cpu kernels dispatch to now ("AVX3_ZEN4", "AVX3", "AVX2", "SSE4", "SCALAR",
// "NEON", ...: Highway's names), or the static build's one.
const char* cpu_target();
// Caps dispatch at `name` (case-insensitive Highway name): every better target is disabled, so the
// kernels run `name`'s code. Call before the first kernel runs (Highway caches its choice per
// function otherwise; the runner calls it at start-up). InvalidArgument naming the value and the
// targets this build and CPU can run; NotSupported in a static-dispatch build (one target compiled).
Status set_cpu_target(const char* name, ErrorContext* ctx);
// The targets this build compiled and this CPU supports, best first, as "AVX3_ZEN4, AVX3, AVX2, ...".
void cpu_targets_text(char* out, size_t capacity);

}  // namespace ember::kernels
