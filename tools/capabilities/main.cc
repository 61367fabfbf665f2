// ember_capabilities: writes the capability manifest (op x dtypes x dim order x quant layout for
// every kernel library and backend of this build) that the exporter's partitioner reads.
// Run by the build; output: <build>/capabilities.json.
#include <cstdio>
#include <cstring>

#include "backends/null/register.h"
#include "kernels/builtin.h"
#include "runtime/kernel/kernel_registry.h"

namespace {

void write_dtypes(FILE* out, const ember::KernelKey& key) {
  std::fputs("[", out);
  for (int i = 0; i < key.arg_count; ++i) {
    std::fprintf(out, "%s\"%s\"", i ? ", " : "",
                 key.dtypes[i] == ember::ScalarType::Invalid ? "-" : ember::to_string(key.dtypes[i]));
  }
  std::fputs("]", out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr, "usage: ember_capabilities OUTPUT.json\n");
    return argc == 2 ? 0 : 2;
  }
  static ember::KernelRegistry registry;
  if (!ember::register_builtin(registry).is_ok()) {
    std::fprintf(stderr, "ember_capabilities: kernel registration failed\n");
    return 1;
  }
  FILE* out = std::fopen(argv[1], "w");
  if (out == nullptr) {
    std::fprintf(stderr, "ember_capabilities: cannot write %s\n", argv[1]);
    return 1;
  }
  std::fprintf(out, "{\"format\": 1, \"runtime_version\": \"0.1.0\",\n \"kernels\": [\n");
  for (size_t i = 0; i < registry.size(); ++i) {
    const auto& e = registry.entry(i);
    std::fprintf(out, "  {\"op\": \"%s\", \"dtypes\": ", ember::to_string(e.key.op));
    write_dtypes(out, e.key);
    std::fprintf(out, ", \"dim_order\": \"%s\", \"quant\": \"%s\", \"library\": \"%s\"}%s\n",
                 e.key.dim_order == ember::DimOrder::ChannelsLast ? "channels_last" : "contiguous",
                 ember::to_string(e.key.quant), e.library, i + 1 < registry.size() ? "," : "");
  }
  // Backends: the ops each advertises, with every dtype signature the portable kernels have for them
  // (the null backend runs on those kernels).
  std::fprintf(out, " ],\n \"backends\": [\n  {\"id\": \"%s\", \"ops\": [\n", ember::backends::null_backend::kBackendId);
  bool first = true;
  for (size_t i = 0; i < registry.size(); ++i) {
    const auto& e = registry.entry(i);
    bool listed = false;
    for (ember::OpCode op : ember::backends::null_backend::supported_ops()) listed = listed || op == e.key.op;
    if (!listed || e.key.quant != ember::QuantLayout::None) continue;
    std::fprintf(out, "%s   {\"op\": \"%s\", \"dtypes\": ", first ? "" : ",\n", ember::to_string(e.key.op));
    write_dtypes(out, e.key);
    std::fputs("}", out);
    first = false;
  }
  std::fprintf(out, "\n  ]}\n ]\n}\n");
  return std::fclose(out) == 0 ? 0 : 1;
}
