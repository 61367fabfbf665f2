// Partitioning: assigns each node to the first backend in `backends` whose manifest entry lists its
// (op, dtypes, dim order), falling back to the portable kernels ("portable"); maximal runs of consecutive
// nodes on one non-portable backend become one GRAPH delegate. The result is the Method's
// instruction list (one step per kernel node or delegate).
//
// Program state (Value::is_state(), a KV cache) read or written in place by a delegated run belongs
// to the delegate (docs/DESIGN.md §7: a delegate whose graph names State claims it and keeps it in its own
// memory): it is listed in DelegateGraph::states, never passed as a delegate input or output, and
// the payload names it by its StateStorage name.
#pragma once

#include <string>
#include <vector>

#include "exporter/ir/graph.h"
#include "exporter/partition/manifest.h"

namespace ember::exporter {

constexpr const char* kPortableBackend = "portable";

struct DelegateGraph {
  std::string backend;
  std::vector<int> nodes;      // graph node indices, in order
  std::vector<int> inputs;     // values read by the run and defined outside it (not constants, not state)
  std::vector<int> outputs;    // values written by the run and read after it, or graph outputs
  std::vector<int> internals;  // values written and read only inside the run
  std::vector<int> constants;  // constants read by the run (quantized ones carry their scales)
  std::vector<int> states;     // program state read or written in place by the run, first use first
};

struct Step {
  enum class Kind { Kernel, Delegate };
  Kind kind = Kind::Kernel;
  int index = 0;  // node index (Kernel) or delegate index (Delegate)
};

struct Partition {
  std::vector<Step> steps;                  // the Method's instructions, in order
  std::vector<DelegateGraph> delegates;
  std::vector<std::string> node_backend;    // per node: "portable" or a backend id
  // Method-level inputs / outputs of step i (value ids; -1 = absent optional input).
  std::vector<int> step_inputs(const Graph& graph, size_t step) const;
  std::vector<int> step_outputs(const Graph& graph, size_t step) const;
};

// Every node on the portable kernels, one step per node, no manifest check.
Partition portable_partition(const Graph& graph);

// Throws ExportError naming the op, node and dtypes when neither a listed backend nor a portable
// kernel supports a node, and when `backends` names a backend the manifest does not know.
Partition partition_graph(const Graph& graph, const CapabilityManifest& manifest,
                          const std::vector<std::string>& backends);

}  // namespace ember::exporter
