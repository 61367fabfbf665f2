// The capability manifest as JSON (exporter/partition/manifest.h has the format): every portable
// kernel signature of `runtime.kernels`, and for each backend of `runtime.backends` every signature
// it answers supports() for (each portable signature asked once, plus its extra_signatures()).
// Host-side (tools and tests): the one writer of the manifest.
#pragma once

#include <functional>
#include <string>

#include "runtime/backend/backend.h"

namespace ember::tools {

// `keep` (may be empty) narrows what a backend lists, e.g. to some ops in tests; it is asked only
// about signatures the backend supports.
std::string capability_manifest_json(
    const RuntimeContext& runtime,
    const std::function<bool(const char* backend, const KernelKey& key)>& keep = {});

}  // namespace ember::tools
