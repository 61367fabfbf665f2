#include "exporter/partition/manifest.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ember::exporter {
namespace {

bool matches(const std::vector<CapabilityManifest::Entry>& entries, const std::string& op,
             const std::vector<std::string>& dtypes) {
  for (const auto& e : entries) {
    if (e.op == op && e.dtypes == dtypes) return true;
  }
  return false;
}

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
  return e;
}

}  // namespace

CapabilityManifest CapabilityManifest::parse(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ExportError("capability manifest " + source + ": " + e.what());
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
      const std::string dim_order = k.value("dim_order", "contiguous");
      const std::string quant = k.value("quant", "none");
      // A quantized weight's dtype reads "f8_e4m3fn:per_channel" (the key's quant layout belongs to
      // its weight, argument 1, as format_key prints it).
      if (quant != "none" && e.dtypes.size() > 1) e.dtypes[1] += ":" + quant;
      if ((library == "cpu" || library == "reference") && dim_order == "contiguous") {
        m.portable_.push_back(std::move(e));
      }
    }
  }
  if (j.contains("backends")) {
    for (const auto& b : j["backends"]) {
      if (!b.is_object() || !b.contains("id") || !b["id"].is_string()) {
        throw ExportError("capability manifest " + source + ": each backend needs an \"id\"");
      }
      auto& list = m.backends_[b["id"].get<std::string>()];
      if (b.contains("ops")) {
        for (const auto& op : b["ops"]) list.push_back(parse_entry(op, "capability manifest " + source + " backend"));
      }
    }
  }
  return m;
}

CapabilityManifest CapabilityManifest::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ExportError("cannot read capability manifest '" + path + "' (build the runtime, or pass --manifest)");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

bool CapabilityManifest::portable_supports(const std::string& op, const std::vector<std::string>& dtypes) const {
  return matches(portable_, op, dtypes);
}

bool CapabilityManifest::backend_supports(const std::string& backend, const std::string& op,
                                          const std::vector<std::string>& dtypes) const {
  auto it = backends_.find(backend);
  return it != backends_.end() && matches(it->second, op, dtypes);
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

std::string format_signature(const std::string& op, const std::vector<std::string>& dtypes) {
  std::string s = op + "(";
  for (size_t i = 0; i < dtypes.size(); ++i) s += (i ? ", " : "") + dtypes[i];
  return s + ")";
}

}  // namespace ember::exporter
