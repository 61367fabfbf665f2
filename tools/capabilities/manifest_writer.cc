#include "tools/capabilities/manifest_writer.h"

#include "runtime/kernel/kernel_registry.h"

namespace ember::tools {
namespace {

std::string signature_json(const KernelKey& key) {
  std::string s = std::string("{\"op\": \"") + to_string(key.op) + "\", \"dtypes\": [";
  for (int i = 0; i < key.arg_count; ++i) {
    s += std::string(i ? ", " : "") + "\"" + (key.dtypes[i] == ScalarType::Invalid ? "-" : to_string(key.dtypes[i])) + "\"";
  }
  return s + "], \"dim_order\": \"" + (key.dim_order == DimOrder::ChannelsLast ? "channels_last" : "contiguous") +
         "\", \"quant\": \"" + to_string(key.quant) + "\"";
}

}  // namespace

std::string capability_manifest_json(const RuntimeContext& runtime,
                                     const std::function<bool(const char*, const KernelKey&)>& keep) {
  const KernelRegistry& kernels = *runtime.kernels;
  std::string out = "{\"format\": 1, \"runtime_version\": \"0.1.0\",\n \"kernels\": [\n";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelRegistry::Entry& e = kernels.entry(i);
    out += "  " + signature_json(e.key) + ", \"library\": \"" + e.library + "\"}" + (i + 1 < kernels.size() ? ",\n" : "\n");
  }
  out += " ],\n \"backends\": [\n";
  const size_t backend_count = runtime.backends != nullptr ? runtime.backends->size() : 0;
  for (size_t b = 0; b < backend_count; ++b) {
    const char* name = runtime.backends->name(b);
    const Backend& backend = runtime.backends->backend(b);
    out += std::string("  {\"id\": \"") + name + "\", \"available\": " +
           (backend.is_available(runtime) ? "true" : "false") + ", \"owns_state\": " +
           (backend.owns_state() ? "true" : "false") + ", \"ops\": [\n";
    bool first = true;
    auto emit = [&](const KernelKey& key) {
      if (keep && !keep(name, key)) return;
      out += std::string(first ? "   " : ",\n   ") + signature_json(key) + "}";
      first = false;
    };
    for (size_t i = 0; i < kernels.size(); ++i) {
      const KernelKey& key = kernels.entry(i).key;
      bool seen = false;  // a signature two kernel libraries register is listed once
      for (size_t j = 0; j < i && !seen; ++j) seen = kernels.entry(j).key == key;
      if (!seen && backend.supports(runtime, key)) emit(key);
    }
    for (const KernelKey& key : backend.extra_signatures()) emit(key);
    out += std::string("\n  ]}") + (b + 1 < backend_count ? ",\n" : "\n");
  }
  return out + " ]\n}\n";
}

}  // namespace ember::tools
