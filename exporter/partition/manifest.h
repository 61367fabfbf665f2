// The capability manifest the runtime build generates (<build>/capabilities.json): which
// (op, dtypes) each portable kernel library and each backend supports.
//
//   {"format": 1, "runtime_version": "0.1.0",
//    "kernels": [{"op": "add", "dtypes": ["f32","f32","f32"], "dim_order": "contiguous",
//                 "quant": "none", "library": "cpu"}],
//    "backends": [{"id": "null", "ops": [{"op": "conv2d", "dtypes": ["f32","f32","-","f32"]}]}]}
//
// dtypes = inputs then outputs, "-" for an absent optional input; op names as to_string(OpCode).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "exporter/ir/graph.h"

namespace ember::exporter {

class CapabilityManifest {
 public:
  struct Entry {
    std::string op;
    std::vector<std::string> dtypes;
  };

  // Throws ExportError (with `source` in the message) on malformed JSON or an unknown format.
  static CapabilityManifest parse(const std::string& json_text, const std::string& source = "manifest");
  static CapabilityManifest load(const std::string& path);

  // A portable kernel (library "cpu" or "reference", contiguous) for exactly these dtypes (a
  // quantized weight's reads "<dtype>:<layout>", e.g. "f8_e4m3fn:per_channel").
  bool portable_supports(const std::string& op, const std::vector<std::string>& dtypes) const;
  bool backend_supports(const std::string& backend, const std::string& op,
                        const std::vector<std::string>& dtypes) const;
  bool has_backend(const std::string& backend) const { return backends_.count(backend) != 0; }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<Entry> portable_;
  std::map<std::string, std::vector<Entry>> backends_;
};

// The (op, dtypes) signature of a node as the manifest writes it.
std::vector<std::string> node_dtypes(const Graph& graph, const Node& node);
std::string format_signature(const std::string& op, const std::vector<std::string>& dtypes);

}  // namespace ember::exporter
