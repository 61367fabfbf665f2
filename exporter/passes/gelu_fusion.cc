#include "exporter/passes/gelu_fusion.h"

#include <cmath>
#include <cstring>

#include "exporter/passes/constant_folding.h"

namespace ember::exporter {
namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
// Wide enough for every f32 spelling of the constants (sqrt(2) rounds to 1.7e-8 relative), narrow
// enough that a model's deliberately different constant (1.414, 0.707) stays unfused: the fused
// kernel computes exactly 0.5 x (1 + erf(x / sqrt(2))).
constexpr double kRelTolerance = 1e-6;

using Users = std::vector<std::vector<int>>;

// The single node reading v when v may be removed with the pattern: not a graph output and exactly
// one reader. -1 otherwise.
int sole_reader(const Graph& g, const Users& users, int v) {
  if (v < 0 || g.is_output(v)) return -1;
  const std::vector<int>& readers = users[static_cast<size_t>(v)];
  return readers.size() == 1 ? readers[0] : -1;
}

// An unquantized f32 constant of one element within kRelTolerance of `target`.
bool is_scalar_near(const Graph& g, int id, double target) {
  if (id < 0) return false;
  const Value& v = g.values[static_cast<size_t>(id)];
  if (!v.is_constant() || v.dtype != ScalarType::F32 || v.quant != nullptr || numel_max(v.dims) != 1 ||
      v.data->size() != sizeof(float)) {
    return false;
  }
  float f = 0.0f;
  std::memcpy(&f, v.data->data(), sizeof(float));
  return std::fabs(static_cast<double>(f) - target) <= kRelTolerance * std::fabs(target);  // false for NaN
}

bool is_binary(const Node& n, OpCode op) { return n.op == op && n.inputs.size() == 2 && n.outputs.size() == 1; }

// For a binary `op` node with a scalar near `target` as its second operand (or either, when the op
// commutes): the other operand. -1 otherwise.
int beside_scalar(const Graph& g, const Node& n, OpCode op, double target, bool commutes) {
  if (!is_binary(n, op)) return -1;
  if (is_scalar_near(g, n.inputs[1], target)) return n.inputs[0];
  if (commutes && is_scalar_near(g, n.inputs[0], target)) return n.inputs[1];
  return -1;
}

// The other operand of a binary node that reads `v` (on either side); -1 if it does not read it.
int other_operand(const Node& n, int v) {
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return -1;
}

struct Match {
  int x = -1;
  int nodes[5] = {-1, -1, -1, -1, -1};  // the five nodes; nodes[4] writes y
};

// The pattern around erf node `e`, or false.
bool match_erf_gelu(const Graph& g, const Users& users, int e, Match* m) {
  const Node& erf = g.nodes[static_cast<size_t>(e)];
  if (erf.op != OpCode::Erf || erf.inputs.size() != 1 || erf.outputs.size() != 1) return false;
  const int t1 = erf.inputs[0];
  if (sole_reader(g, users, t1) != e) return false;
  const int scale = g.values[static_cast<size_t>(t1)].producer;
  if (scale < 0) return false;
  const Node& scale_node = g.nodes[static_cast<size_t>(scale)];
  int x = beside_scalar(g, scale_node, OpCode::Div, kSqrt2, false);
  if (x < 0) x = beside_scalar(g, scale_node, OpCode::Mul, 1.0 / kSqrt2, true);
  if (x < 0) return false;

  const int t2 = erf.outputs[0];
  const int plus = sole_reader(g, users, t2);
  if (plus < 0 || beside_scalar(g, g.nodes[static_cast<size_t>(plus)], OpCode::Add, 1.0, true) != t2) return false;
  const int t3 = g.nodes[static_cast<size_t>(plus)].outputs[0];
  const int r3 = sole_reader(g, users, t3);
  if (r3 < 0 || !is_binary(g.nodes[static_cast<size_t>(r3)], OpCode::Mul)) return false;
  const Node& mul3 = g.nodes[static_cast<size_t>(r3)];
  const int other = other_operand(mul3, t3);
  int fourth = -1, last = -1;
  if (other == x) {  // (x * t3) * 0.5
    const int t4 = mul3.outputs[0];
    const int half = sole_reader(g, users, t4);
    if (half < 0 || beside_scalar(g, g.nodes[static_cast<size_t>(half)], OpCode::Mul, 0.5, true) != t4) return false;
    fourth = r3;
    last = half;
  } else if (is_scalar_near(g, other, 0.5)) {  // x * (t3 * 0.5)
    const int t5 = mul3.outputs[0];
    const int outer = sole_reader(g, users, t5);
    if (outer < 0 || !is_binary(g.nodes[static_cast<size_t>(outer)], OpCode::Mul) ||
        other_operand(g.nodes[static_cast<size_t>(outer)], t5) != x) {
      return false;
    }
    fourth = r3;
    last = outer;
  } else {  // (x * 0.5) * t3
    if (other < 0 || sole_reader(g, users, other) != r3) return false;
    const int half = g.values[static_cast<size_t>(other)].producer;
    if (half < 0 || beside_scalar(g, g.nodes[static_cast<size_t>(half)], OpCode::Mul, 0.5, true) != x) return false;
    fourth = half;
    last = r3;
  }

  // Every value the five nodes write is f32 with x's dims: a [1, 1] constant would have broadcast a
  // rank-1 x to [1, N], which gelu(x) would not reproduce.
  const Value& xv = g.values[static_cast<size_t>(x)];
  if (xv.dtype != ScalarType::F32) return false;
  const int nodes[5] = {scale, e, plus, fourth, last};
  for (int n : nodes) {
    const Value& out = g.values[static_cast<size_t>(g.nodes[static_cast<size_t>(n)].outputs[0])];
    if (out.dtype != ScalarType::F32 || out.dims != xv.dims) return false;
  }
  m->x = x;
  std::memcpy(m->nodes, nodes, sizeof(nodes));
  return true;
}

}  // namespace

int fuse_gelus(Graph& graph) {
  const Users users = graph.users();
  // Single-reader intermediates already keep matches apart; this makes it independent of that.
  std::vector<char> claimed(graph.nodes.size(), 0);
  int fused = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Match m;
    if (!match_erf_gelu(graph, users, static_cast<int>(n), &m)) continue;
    bool free = true;
    for (int k : m.nodes) free = free && !claimed[static_cast<size_t>(k)];
    if (!free) continue;
    for (int k : m.nodes) claimed[static_cast<size_t>(k)] = 1;
    // The last node becomes gelu(x) in place: x is written before the first of the five nodes, so
    // the order stays topological, and y keeps its id, name and readers. The other four nodes are
    // now unread, and go with the dead code.
    Node& out = graph.nodes[static_cast<size_t>(m.nodes[4])];
    out.op = OpCode::Gelu;
    out.attrs = OpAttrs{};
    out.attrs.kind = AttrKind::Gelu;
    out.attrs.gelu_approx = GeluApprox::None;
    out.inputs = {m.x};
    out.source_op = "gelu_fusion";
    ++fused;
  }
  if (fused > 0) remove_dead_code(graph);
  return fused;
}

}  // namespace ember::exporter
