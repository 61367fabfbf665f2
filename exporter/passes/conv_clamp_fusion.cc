#include "exporter/passes/conv_clamp_fusion.h"

#include <limits>
#include <vector>

#include "exporter/passes/constant_folding.h"

namespace ember::exporter {
namespace {

// The clamp [lo, hi] a relu or clip node applies; false for other ops and for bounds a conv cannot
// carry (NaN, or min > max, where clip yields max everywhere).
bool clamp_of(const Node& node, float* lo, float* hi) {
  if (node.op == OpCode::Relu) {
    *lo = 0.0f;
    *hi = std::numeric_limits<float>::infinity();
    return true;
  }
  if (node.op != OpCode::Clip) return false;
  *lo = node.attrs.clip_min;
  *hi = node.attrs.clip_max;
  return *lo <= *hi;  // false for NaN too
}

// Nodes other than the fused-away ones that read value v (once per node).
int count_readers(const Graph& graph, int v, const std::vector<char>& fused_away) {
  int count = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (fused_away[n]) continue;
    for (int in : graph.nodes[n].inputs) {
      if (in == v) {
        ++count;
        break;
      }
    }
  }
  return count;
}

}  // namespace

int fuse_conv_clamps(Graph& graph) {
  int fused = 0;
  // A fused relu / clip still reads x until remove_dead_code drops it; it is no reader any more.
  std::vector<char> fused_away(graph.nodes.size(), 0);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& act = graph.nodes[n];
    float lo = 0.0f, hi = 0.0f;
    if (act.inputs.size() != 1 || act.outputs.size() != 1 || !clamp_of(act, &lo, &hi)) continue;
    const int x = act.inputs[0];
    if (x < 0 || graph.is_output(x)) continue;
    const Value& xv = graph.values[static_cast<size_t>(x)];
    if (xv.producer < 0 || xv.dtype != ScalarType::F32) continue;
    Node& conv = graph.nodes[static_cast<size_t>(xv.producer)];
    if (conv.op != OpCode::Conv2d || conv.outputs.size() != 1) continue;
    // Counted per candidate: an earlier fusion rewired readers (a relu -> clip chain).
    if (count_readers(graph, x, fused_away) != 1) continue;
    // clip(clip(v, a, b), c, d) = clip(v, max(a, c), min(b, d)) when that range is not empty.
    const float new_lo = conv.attrs.out_min > lo ? conv.attrs.out_min : lo;
    const float new_hi = conv.attrs.out_max < hi ? conv.attrs.out_max : hi;
    if (!(new_lo <= new_hi)) continue;
    conv.attrs.out_min = new_lo;
    conv.attrs.out_max = new_hi;
    const int y = act.outputs[0];
    for (Node& other : graph.nodes) {
      for (int& in : other.inputs) {
        if (in == y) in = x;
      }
    }
    for (NamedValue& nv : graph.outputs) {
      if (nv.value == y) nv.value = x;
    }
    fused_away[n] = 1;
    ++fused;
  }
  if (fused > 0) remove_dead_code(graph);
  return fused;
}

}  // namespace ember::exporter
