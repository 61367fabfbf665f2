// ember_capabilities: writes the capability manifest (op x dtypes x dim order x quant layout for
// every kernel library and every backend of this build) that the exporter's partitioner reads.
// Run by the build; output: <build>/capabilities.json. Backends answer for themselves: each
// registered backend (register_builtin_backends()) is asked Backend::supports() about every
// signature the portable kernels have, plus the extra signatures it lists.
#include <cstdio>
#include <cstring>

#include "backends/builtin.h"
#include "kernels/builtin.h"
#include "runtime/kernel/kernel_registry.h"

namespace {

void write_signature(FILE* out, const ember::KernelKey& key) {
  std::fprintf(out, "{\"op\": \"%s\", \"dtypes\": [", ember::to_string(key.op));
  for (int i = 0; i < key.arg_count; ++i) {
    std::fprintf(out, "%s\"%s\"", i ? ", " : "",
                 key.dtypes[i] == ember::ScalarType::Invalid ? "-" : ember::to_string(key.dtypes[i]));
  }
  std::fprintf(out, "], \"dim_order\": \"%s\", \"quant\": \"%s\"",
               key.dim_order == ember::DimOrder::ChannelsLast ? "channels_last" : "contiguous",
               ember::to_string(key.quant));
}

}  // namespace

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
  FILE* out = std::fopen(argv[1], "w");
  if (out == nullptr) {
    std::fprintf(stderr, "ember_capabilities: cannot write %s\n", argv[1]);
    return 1;
  }
  std::fprintf(out, "{\"format\": 1, \"runtime_version\": \"0.1.0\",\n \"kernels\": [\n");
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto& e = kernels.entry(i);
    std::fputs("  ", out);
    write_signature(out, e.key);
    std::fprintf(out, ", \"library\": \"%s\"}%s\n", e.library, i + 1 < kernels.size() ? "," : "");
  }
  std::fprintf(out, " ],\n \"backends\": [\n");
  for (size_t b = 0; b < backends.size(); ++b) {
    const ember::Backend& backend = backends.backend(b);
    std::fprintf(out, "  {\"id\": \"%s\", \"available\": %s, \"owns_state\": %s, \"ops\": [\n", backends.name(b),
                 backend.is_available(runtime) ? "true" : "false", backend.owns_state() ? "true" : "false");
    bool first = true;
    auto emit = [&](const ember::KernelKey& key) {
      std::fputs(first ? "   " : ",\n   ", out);
      write_signature(out, key);
      std::fputs("}", out);
      first = false;
    };
    // A signature registered by two kernel libraries (cpu and reference) is listed once.
    for (size_t i = 0; i < kernels.size(); ++i) {
      const ember::KernelKey& key = kernels.entry(i).key;
      bool seen = false;
      for (size_t j = 0; j < i && !seen; ++j) seen = kernels.entry(j).key == key;
      if (!seen && backend.supports(runtime, key)) emit(key);
    }
    for (const ember::KernelKey& key : backend.extra_signatures()) emit(key);
    std::fprintf(out, "\n  ]}%s\n", b + 1 < backends.size() ? "," : "");
  }
  std::fprintf(out, " ]\n}\n");
  return std::fclose(out) == 0 ? 0 : 1;
}
