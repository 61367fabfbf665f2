// The null backend: the template every backend is copied from (README.md), and the delegate the
// tests and examples use. It runs GRAPH payloads on the kernels of the RuntimeContext's registry,
// in host memory it plans for itself at init.
#pragma once

#include "runtime/backend/backend.h"
#include "runtime/kernel/op.h"

namespace ember::backends::null_backend {

constexpr const char* kBackendId = "null";

// Adds the backend under "null". No static initializers: call it once at start-up.
Status register_backend(BackendRegistry& registry);

}  // namespace ember::backends::null_backend

namespace ember::backends::null_backend {

// Ops the exporter may delegate to this backend (written into the capability manifest). The null
// backend could run any op with a portable kernel; it advertises the CNN feature-extractor ops so
// the examples show a partitioned graph.
Span<const OpCode> supported_ops();

}  // namespace ember::backends::null_backend
