#include "exporter/passes/constant_folding.h"

#include <memory>

#include "exporter/passes/evaluate.h"
#include "runtime/kernel/op_info.h"

namespace ember::exporter {
namespace {

// Keeps the values with keep[v] and the nodes with keep_node[n]; rewrites every id.
void compact(Graph& graph, const std::vector<char>& keep, const std::vector<char>& keep_node) {
  std::vector<int> remap(graph.values.size(), -1);
  std::vector<Value> values;
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (!keep[v]) continue;
    remap[v] = static_cast<int>(values.size());
    values.push_back(std::move(graph.values[v]));
  }
  std::vector<Node> nodes;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!keep_node[n]) continue;
    Node node = std::move(graph.nodes[n]);
    for (int& in : node.inputs) in = in < 0 ? -1 : remap[static_cast<size_t>(in)];
    for (int& out : node.outputs) out = remap[static_cast<size_t>(out)];
    for (int out : node.outputs) values[static_cast<size_t>(out)].producer = static_cast<int>(nodes.size());
    nodes.push_back(std::move(node));
  }
  for (NamedValue& nv : graph.inputs) nv.value = remap[static_cast<size_t>(nv.value)];
  for (NamedValue& nv : graph.outputs) nv.value = remap[static_cast<size_t>(nv.value)];
  graph.values = std::move(values);
  graph.nodes = std::move(nodes);
}

std::vector<char> referenced_values(const Graph& graph, const std::vector<char>& keep_node) {
  std::vector<char> keep(graph.values.size(), 0);
  for (const NamedValue& nv : graph.inputs) keep[static_cast<size_t>(nv.value)] = 1;
  for (const NamedValue& nv : graph.outputs) keep[static_cast<size_t>(nv.value)] = 1;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!keep_node[n]) continue;
    for (int in : graph.nodes[n].inputs) {
      if (in >= 0) keep[static_cast<size_t>(in)] = 1;
    }
    for (int out : graph.nodes[n].outputs) keep[static_cast<size_t>(out)] = 1;
  }
  return keep;
}

}  // namespace

FoldStats fold_constants(Graph& graph) {
  FoldStats stats;
  std::vector<char> keep_node(graph.nodes.size(), 1);
  const std::vector<int64_t> symbols;  // folded nodes have static shapes
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& node = graph.nodes[n];
    bool foldable = !node.inputs.empty();
    std::vector<const HostTensor*> ins;
    std::vector<std::unique_ptr<HostTensor>> owned;
    for (int in : node.inputs) {
      if (in < 0) {
        ins.push_back(nullptr);
        continue;
      }
      const Value& v = graph.values[static_cast<size_t>(in)];
      if (!v.is_constant()) {
        foldable = false;
        break;
      }
      auto t = std::make_unique<HostTensor>();
      t->dtype = v.dtype;
      for (const Dim& d : v.dims) t->dims.push_back(d.max);
      t->bytes = *v.data;
      t->quant = v.quant;
      ins.push_back(t.get());
      owned.push_back(std::move(t));
    }
    for (int out : node.outputs) {
      foldable = foldable && !graph.is_output(out);
      // Constant inputs but a run-time shape (a Slice whose end is a symbol): stays a node.
      for (const Dim& d : graph.values[static_cast<size_t>(out)].dims) foldable = foldable && d.sym == 0;
    }
    if (!foldable) continue;
    std::vector<HostTensor> outs = evaluate_node(node, ins, symbols);
    for (size_t o = 0; o < outs.size(); ++o) {
      Value& v = graph.values[static_cast<size_t>(node.outputs[o])];
      v.dtype = outs[o].dtype;
      v.dims.clear();
      for (int64_t d : outs[o].dims) v.dims.push_back(Dim{d, 0});
      v.data = std::make_shared<const std::vector<uint8_t>>(std::move(outs[o].bytes));
      v.producer = -1;
    }
    keep_node[n] = 0;
    ++stats.folded_nodes;
  }
  if (stats.folded_nodes == 0) return stats;
  const std::vector<char> keep = referenced_values(graph, keep_node);
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (!keep[v] && graph.values[v].is_constant()) ++stats.removed_constants;
  }
  compact(graph, keep, keep_node);
  return stats;
}

int remove_dead_code(Graph& graph) {
  std::vector<char> needed(graph.values.size(), 0);
  for (const NamedValue& nv : graph.outputs) needed[static_cast<size_t>(nv.value)] = 1;
  std::vector<char> keep_node(graph.nodes.size(), 0);
  for (size_t n = graph.nodes.size(); n-- > 0;) {
    const Node& node = graph.nodes[n];
    // A node that writes program state in place (the KV cache) has an effect beyond its outputs.
    const OpInfo* info = find_op_info(node.op);
    bool live = info != nullptr && info->state_inputs != 0;
    for (int out : node.outputs) live = live || needed[static_cast<size_t>(out)];
    if (!live) continue;
    keep_node[n] = 1;
    for (int in : node.inputs) {
      if (in >= 0) needed[static_cast<size_t>(in)] = 1;
    }
  }
  int removed = 0;
  for (char k : keep_node) removed += k ? 0 : 1;
  // Also drops values nothing references any more (constants replaced by a pass), even when no node
  // was removed.
  const std::vector<char> keep = referenced_values(graph, keep_node);
  bool drop_values = false;
  for (char k : keep) drop_values = drop_values || !k;
  if (removed == 0 && !drop_values) return 0;
  compact(graph, keep, keep_node);
  return removed;
}

}  // namespace ember::exporter
