// ember_capabilities: writes the capability manifest (op x dtypes x dim order x quant layout for
// every kernel library and every backend of this build) that the exporter's partitioner reads.
// Run by the build; output: <build>/capabilities.json. Backends answer for themselves: each
// registered backend (register_builtin_backends()) is asked Backend::supports()
// (tools/capabilities/manifest_writer.h).
#include <cstdio>
#include <cstring>

#include "backends/builtin.h"
#include "kernels/builtin.h"
#include "runtime/kernel/kernel_registry.h"
#include "tools/capabilities/manifest_writer.h"
#include "tools/common/host_io.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr, "usage: ember_capabilities OUTPUT.json\n");
    return argc == 2 ? 0 : 2;
  }
  static ember::KernelRegistry kernels;
  static ember::BackendRegistry backends;
  if (!ember::register_builtin(kernels).is_ok() || !ember::register_builtin_backends(backends).is_ok()) {
    std::fprintf(stderr, "ember_capabilities: registration failed\n");
    return 1;
  }
  ember::RuntimeContext runtime;
  runtime.kernels = &kernels;
  runtime.backends = &backends;
  const std::string json = ember::tools::capability_manifest_json(runtime);
  try {
    // Atomic: an exporter reading the manifest never sees a half-written one.
    ember::tools::write_file_atomically(argv[1], json.data(), json.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember_capabilities: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
