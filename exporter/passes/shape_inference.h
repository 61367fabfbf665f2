// Shape and dtype inference with symbols, driven by each op's ShapeFn (runtime/kernel/op_info.h):
// op shape rules live there only.
//
// Symbolic dims are found by probing: the shape functions run once per probe, where a probe gives
// every declared symbol a value: all at max (this gives each dim's `max`), all at min, all at
// max - 1 (clamped to min), and for each symbol s: s at min and the others at max. An output dim
// that has one value in every probe is static; one that equals a symbol's value in every probe
// takes that symbol; any other dim gets a new derived symbol "<value>.d<i>" whose bounds are the
// smallest and largest probed value (later dims equal to it in every probe reuse it).
#pragma once

#include <cstdint>
#include <vector>

#include "exporter/ir/graph.h"

namespace ember::exporter {

// Incremental inference over a Graph whose declared symbols are fixed. Thread-compatible.
class ShapeInference {
 public:
  // Takes the graph's current symbols as the declared ones; `graph` must outlive this object.
  explicit ShapeInference(Graph& graph);

  // Records the probe dims of a graph input or constant (its dims and symbols are given).
  void add_source(int value);
  // Runs node `node`'s ShapeFn in every probe and sets its outputs' dtype and dims, adding derived
  // symbols as needed. Throws ExportError naming the op, node, input dtypes/dims and, when only some
  // probes fail, the symbol values that fail.
  void infer_node(int node);
  // The dims of `value` in probe `probe` (0 = every symbol at max).
  const std::vector<int64_t>& probe_dims(int value, size_t probe) const;
  size_t probe_count() const { return probe_symbols_.size(); }
  size_t declared_symbol_count() const { return declared_; }

 private:
  std::vector<int64_t> dims_in_probe(const std::vector<Dim>& dims, size_t probe) const;
  std::string describe_probe(size_t probe) const;

  Graph& graph_;
  size_t declared_ = 0;
  // probe_symbols_[p][s] = value of symbol s + 1 in probe p (declared and derived symbols).
  std::vector<std::vector<int64_t>> probe_symbols_;
  // probe_dims_[v][p] = dims of value v in probe p (empty for values not yet inferred).
  std::vector<std::vector<std::vector<int64_t>>> probe_dims_;
};

// Re-infers every node's outputs from the graph inputs and constants, from scratch: derived
// symbols are dropped and recreated. For importers that build a Graph directly.
void infer_shapes(Graph& graph);

}  // namespace ember::exporter
