// The capability manifest the runtime build generates (<build>/capabilities.json): which
// (op, dtypes, dim order, weight quant layout) each portable kernel library and each backend supports.
//
//   {"format": 1, "runtime_version": "0.1.0",
//    "kernels": [{"op": "add", "dtypes": ["f32","f32","f32"], "dim_order": "contiguous",
//                 "quant": "none", "library": "cpu"}],
//    "backends": [{"id": "sim", "owns_state": true, "ops": [
//        {"op": "conv2d", "dtypes": ["f32","f32","-","f32"]},
//        {"op": "linear", "dtypes": ["f32","f8_e4m3fn","-","f32"], "dim_order": "contiguous",
//         "quant": "per_channel"}]}]}
//
// dtypes = inputs then outputs, "-" for an absent optional input; op names as to_string(OpCode).
// Kernel and backend entries read "dim_order" and "quant" alike: dim_order is "contiguous" (the
// default) or "channels_last"; quant is "none" (the default) or a weight layout as
// to_string(QuantLayout) names it (per_tensor, per_channel, block2d, mx, nvfp4), and then belongs to
// argument 1 (the weight): the entry matches a node whose weight dtype reads "<dtype>:<layout>"
// ("f8_e4m3fn:per_channel"). An entry matches only nodes of its dim order; every node the exporter
// makes today is contiguous (there is no layout pass), so channels_last entries are kept but match
// nothing yet. Portable kernels are the "cpu" and "reference" libraries' entries. A backend's
// "owns_state" (default false) says that program state its delegates name lives in its own memory
// (runtime/backend/README.md), so no other backend or portable kernel may name the same state.
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
    std::vector<std::string> dtypes;  // a quantized weight's with its ":<layout>" suffix
    std::string dim_order = "contiguous";
  };

  // Throws ExportError (with `source` in the message) on malformed JSON, an unknown format, or an
  // entry whose dim_order or quant is not one of the names above.
  static CapabilityManifest parse(const std::string& json_text, const std::string& source = "manifest");
  static CapabilityManifest load(const std::string& path);

  // A portable kernel (library "cpu" or "reference") for exactly these dtypes (a quantized weight's
  // reads "<dtype>:<layout>", e.g. "f8_e4m3fn:per_channel") in this dim order.
  bool portable_supports(const std::string& op, const std::vector<std::string>& dtypes,
                         const std::string& dim_order = "contiguous") const;
  // The same question for one backend's entries; false for a backend the manifest does not list.
  bool backend_supports(const std::string& backend, const std::string& op, const std::vector<std::string>& dtypes,
                        const std::string& dim_order = "contiguous") const;
  bool has_backend(const std::string& backend) const { return backends_.count(backend) != 0; }
  // The backend keeps program state in its own memory ("owns_state"); false when not listed.
  bool backend_owns_state(const std::string& backend) const { return owns_state_.count(backend) != 0; }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<Entry> portable_;
  std::map<std::string, std::vector<Entry>> backends_;
  std::map<std::string, bool> owns_state_;  // the backends whose "owns_state" is true
};

// The (op, dtypes) signature of a node as the manifest writes it.
std::vector<std::string> node_dtypes(const Graph& graph, const Node& node);
// The dim order a node computes in, as the manifest names it: "contiguous" for every node today
// (activations stay logical NCHW; there is no layout pass, see exporter/README.md).
std::string node_dim_order(const Graph& graph, const Node& node);
std::string format_signature(const std::string& op, const std::vector<std::string>& dtypes);

}  // namespace ember::exporter
