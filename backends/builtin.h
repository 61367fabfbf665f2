// register_builtin_backends(): registers every backend this build has, in the default priority
// order (device backends first, then the host ones), into `registry`. Generated at configure time
// from the EMBER_BACKEND_* options (backends/builtin.cc.in), so runner, the capabilities tool and
// examples/app never list backends by hand. Link ember::backends_builtin (or the archives of the
// backends it names). No static initializers: call it once at start-up.
#pragma once

#include "runtime/backend/backend.h"

namespace ember {

Status register_builtin_backends(BackendRegistry& registry);

// The names register_builtin_backends() adds, in order, comma-separated ("sim, null").
const char* builtin_backend_names();

}  // namespace ember
