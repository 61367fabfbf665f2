#include "exporter/partition/manifest.h"

#include <nlohmann/json.hpp>

#include "tools/common/host_io.h"

namespace ember::exporter {
namespace {

bool matches(const std::vector<CapabilityManifest::Entry>& entries, const std::string& op,
             const std::vector<std::string>& dtypes, const std::string& dim_order) {
  for (const auto& e : entries) {
    if (e.op == op && e.dtypes == dtypes && e.dim_order == dim_order) return true;
  }
  return false;
}

std::string optional_string(const nlohmann::json& j, const char* key, const char* fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_string()) throw ExportError(where + ": \"" + key + "\" must be a string");
  return j[key].get<std::string>();
}

bool is_quant_name(const std::string& name) {
  for (QuantLayout l : {QuantLayout::None, QuantLayout::PerTensor, QuantLayout::PerChannel, QuantLayout::Block2d,
                        QuantLayout::Mx, QuantLayout::Nvfp4}) {
    if (name == to_string(l)) return true;
  }
  return false;
}

// One kernel or backend entry: op, dtypes, and the optional dim_order / quant (kernels and backends
// read them alike).
CapabilityManifest::Entry parse_entry(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("op") || !j["op"].is_string() || !j.contains("dtypes") || !j["dtypes"].is_array()) {
    throw ExportError(where + ": each entry needs \"op\" (string) and \"dtypes\" (array)");
  }
  CapabilityManifest::Entry e;
  e.op = j["op"].get<std::string>();
  for (const auto& d : j["dtypes"]) {
    if (!d.is_string()) throw ExportError(where + ": dtypes must be strings");
    e.dtypes.push_back(d.get<std::string>());
  }
  const std::string signature = format_signature(e.op, e.dtypes);
  e.dim_order = optional_string(j, "dim_order", "contiguous", where);
  if (e.dim_order != "contiguous" && e.dim_order != "channels_last") {
    throw ExportError(where + ": " + signature + " has dim_order '" + e.dim_order +
                      "' (expected contiguous or channels_last)");
  }
  const std::string quant = optional_string(j, "quant", "none", where);
  if (!is_quant_name(quant)) {
    throw ExportError(where + ": " + signature + " has quant '" + quant +
                      "' (expected none, per_tensor, per_channel, block2d, mx or nvfp4)");
  }
  // A quantized weight's dtype reads "f8_e4m3fn:per_channel" (the key's quant layout belongs to its
  // weight, argument 1, as format_key prints it).
  if (quant != "none") {
    if (e.dtypes.size() < 2) throw ExportError(where + ": " + signature + " has quant '" + quant + "' but no weight argument");
    e.dtypes[1] += ":" + quant;
  }
  return e;
}

}  // namespace

CapabilityManifest CapabilityManifest::parse(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = tools::parse_json(text, "capability manifest " + source);
  } catch (const tools::HostIoError& e) {
    throw ExportError(e.what());
  }
  if (!j.is_object() || j.value("format", 0) != 1) {
    throw ExportError("capability manifest " + source + ": expected an object with \"format\": 1");
  }
  CapabilityManifest m;
  m.source_ = source;
  if (j.contains("kernels")) {
    for (const auto& k : j["kernels"]) {
      Entry e = parse_entry(k, "capability manifest " + source + " kernels");
      const std::string library = k.value("library", "");
      if (library == "cpu" || library == "reference") m.portable_.push_back(std::move(e));
    }
  }
  if (j.contains("backends")) {
    for (const auto& b : j["backends"]) {
      if (!b.is_object() || !b.contains("id") || !b["id"].is_string()) {
        throw ExportError("capability manifest " + source + ": each backend needs an \"id\"");
      }
      const std::string id = b["id"].get<std::string>();
      auto& list = m.backends_[id];
      if (b.contains("owns_state")) {
        if (!b["owns_state"].is_boolean()) {
          throw ExportError("capability manifest " + source + ": backend '" + id + "': \"owns_state\" must be a boolean");
        }
        if (b["owns_state"].get<bool>()) m.owns_state_[id] = true;
      }
      if (b.contains("ops")) {
        for (const auto& op : b["ops"]) {
          list.push_back(parse_entry(op, "capability manifest " + source + " backend '" + id + "'"));
        }
      }
    }
  }
  return m;
}

CapabilityManifest CapabilityManifest::load(const std::string& path) {
  std::string text;
  try {
    text = tools::read_regular_file(path, tools::JsonLimits{}.max_bytes, "capability manifest");
  } catch (const tools::HostIoError& e) {
    throw ExportError(std::string(e.what()) + " (build the runtime, or pass --manifest)");
  }
  return parse(text, path);
}

bool CapabilityManifest::portable_supports(const std::string& op, const std::vector<std::string>& dtypes,
                                           const std::string& dim_order) const {
  return matches(portable_, op, dtypes, dim_order);
}

bool CapabilityManifest::backend_supports(const std::string& backend, const std::string& op,
                                          const std::vector<std::string>& dtypes, const std::string& dim_order) const {
  auto it = backends_.find(backend);
  return it != backends_.end() && matches(it->second, op, dtypes, dim_order);
}

std::vector<std::string> node_dtypes(const Graph& graph, const Node& node) {
  std::vector<std::string> out;
  for (int in : node.inputs) {
    if (in < 0) {
      out.push_back("-");
      continue;
    }
    const Value& v = graph.values[static_cast<size_t>(in)];
    std::string d = to_string(v.dtype);
    if (v.quant) d += std::string(":") + to_string(quant_layout(v));
    out.push_back(std::move(d));
  }
  for (int o : node.outputs) out.push_back(to_string(graph.values[static_cast<size_t>(o)].dtype));
  return out;
}

std::string node_dim_order(const Graph&, const Node&) { return "contiguous"; }

std::string format_signature(const std::string& op, const std::vector<std::string>& dtypes) {
  std::string s = op + "(";
  for (size_t i = 0; i < dtypes.size(); ++i) s += (i ? ", " : "") + dtypes[i];
  return s + ")";
}

}  // namespace ember::exporter
