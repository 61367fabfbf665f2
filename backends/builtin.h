// register_builtin_backends(): registers every backend this build has, in the default priority
// order (device backends first, then the host ones), into `registry`. Generated at configure time
// from the EMBER_BACKEND_* options (backends/builtin.cc.in), so runner, the capabilities tool and
// examples/app never list backends by hand. Link ember::backends_builtin (or the archives of the
// backends it names). No static initializers: call it once at start-up.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/backend/backend.h"
#include "runtime/core/thread_pool.h"

namespace ember {

Status register_builtin_backends(BackendRegistry& registry);

// The names register_builtin_backends() adds, in order, comma-separated ("sim, null").
const char* builtin_backend_names();

// The thread pool an app should hand to RuntimeContext::pool: with the XNNPACK backend built, a
// PthreadPool (backends/xnnpack/thread_pool.h), whose threads XNNPACK delegates share with the cpu
// kernels; else a FixedThreadPool. `threads` in [1, FixedThreadPool::kMaxThreads], caller included.
std::unique_ptr<ThreadPool> make_builtin_thread_pool(size_t threads);

}  // namespace ember
