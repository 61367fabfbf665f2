#include "exporter/passes/gelu_fusion.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "exporter/passes/constant_folding.h"

namespace ember::exporter {
namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrtTwoOverPi = 0.79788456080286535588;
constexpr double kKappa = 0.044715;
// Wide enough for every f32 spelling of the constants (sqrt(2) rounds to 1.7e-8 relative), narrow
// enough that a model's deliberately different constant (1.414, 0.707) stays unfused: the fused
// kernel computes exactly 0.5 x (1 + erf(x / sqrt(2))) (or its tanh formula).
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

// The values of one match: x, the approximation, and its nodes; the last one writes y.
struct Match {
  int x = -1;
  GeluApprox approx = GeluApprox::None;
  std::vector<int> nodes;
};

// erf(x / sqrt(2)) from erf node `e`: x and the scaling node, or -1.
int match_erf_head(const Graph& g, const Users& users, int e, std::vector<int>* nodes) {
  const Node& erf = g.nodes[static_cast<size_t>(e)];
  const int t1 = erf.inputs[0];
  if (sole_reader(g, users, t1) != e) return -1;
  const int scale = g.values[static_cast<size_t>(t1)].producer;
  if (scale < 0) return -1;
  const Node& scale_node = g.nodes[static_cast<size_t>(scale)];
  int x = beside_scalar(g, scale_node, OpCode::Div, kSqrt2, false);
  if (x < 0) x = beside_scalar(g, scale_node, OpCode::Mul, 1.0 / kSqrt2, true);
  if (x < 0) return -1;
  nodes->push_back(scale);
  return x;
}

// The cube of x read by node `k` (mul by kappa): x * (x * x), (x * x) * x or pow(x, 3); appends its
// nodes, false otherwise.
bool match_cube(const Graph& g, const Users& users, int cube, int x, int k, std::vector<int>* nodes) {
  if (sole_reader(g, users, cube) != k) return false;
  const int p = g.values[static_cast<size_t>(cube)].producer;
  if (p < 0) return false;
  const Node& n = g.nodes[static_cast<size_t>(p)];
  if (is_binary(n, OpCode::Pow) && n.inputs[0] == x && is_scalar_near(g, n.inputs[1], 3.0)) {
    nodes->push_back(p);
    return true;
  }
  if (!is_binary(n, OpCode::Mul)) return false;
  const int square = other_operand(n, x);
  if (square < 0 || square == x || sole_reader(g, users, square) != p) return false;
  const int sq = g.values[static_cast<size_t>(square)].producer;
  if (sq < 0) return false;
  const Node& sq_node = g.nodes[static_cast<size_t>(sq)];
  if (!is_binary(sq_node, OpCode::Mul) || sq_node.inputs[0] != x || sq_node.inputs[1] != x) return false;
  nodes->push_back(sq);
  nodes->push_back(p);
  return true;
}

// tanh(sqrt(2/pi) * (x + 0.044715 * x^3)) from tanh node `t`: x and the five or six nodes before
// it, or -1.
int match_tanh_head(const Graph& g, const Users& users, int t, std::vector<int>* nodes) {
  const int inner = g.nodes[static_cast<size_t>(t)].inputs[0];
  if (sole_reader(g, users, inner) != t) return -1;
  const int scale = g.values[static_cast<size_t>(inner)].producer;
  if (scale < 0) return -1;
  const int sum = beside_scalar(g, g.nodes[static_cast<size_t>(scale)], OpCode::Mul, kSqrtTwoOverPi, true);
  if (sum < 0 || sole_reader(g, users, sum) != scale) return -1;
  const int plus = g.values[static_cast<size_t>(sum)].producer;
  if (plus < 0 || !is_binary(g.nodes[static_cast<size_t>(plus)], OpCode::Add)) return -1;
  const Node& plus_node = g.nodes[static_cast<size_t>(plus)];
  for (int side = 0; side < 2; ++side) {  // which operand of the sum is x
    const int x = plus_node.inputs[static_cast<size_t>(side)];
    const int term = plus_node.inputs[static_cast<size_t>(1 - side)];
    if (x < 0 || term < 0 || sole_reader(g, users, term) != plus) continue;
    const int k = g.values[static_cast<size_t>(term)].producer;
    if (k < 0) continue;
    const int cube = beside_scalar(g, g.nodes[static_cast<size_t>(k)], OpCode::Mul, kKappa, true);
    std::vector<int> cube_nodes;
    if (cube < 0 || !match_cube(g, users, cube, x, k, &cube_nodes)) continue;
    nodes->insert(nodes->end(), cube_nodes.begin(), cube_nodes.end());
    nodes->insert(nodes->end(), {k, plus, scale});
    return x;
  }
  return -1;
}

// From u = erf(..) or tanh(..) (node `unary`): t3 = u + 1, then the product of x, t3 and 0.5 in one
// of three groupings; appends the nodes (the last writes y), false otherwise.
bool match_tail(const Graph& g, const Users& users, int unary, int x, std::vector<int>* nodes) {
  const int u = g.nodes[static_cast<size_t>(unary)].outputs[0];
  const int plus = sole_reader(g, users, u);
  if (plus < 0 || beside_scalar(g, g.nodes[static_cast<size_t>(plus)], OpCode::Add, 1.0, true) != u) return false;
  const int t3 = g.nodes[static_cast<size_t>(plus)].outputs[0];
  const int r3 = sole_reader(g, users, t3);
  if (r3 < 0 || !is_binary(g.nodes[static_cast<size_t>(r3)], OpCode::Mul)) return false;
  const Node& mul3 = g.nodes[static_cast<size_t>(r3)];
  const int other = other_operand(mul3, t3);
  nodes->push_back(plus);
  if (other == x) {  // (x * t3) * 0.5
    const int t4 = mul3.outputs[0];
    const int half = sole_reader(g, users, t4);
    if (half < 0 || beside_scalar(g, g.nodes[static_cast<size_t>(half)], OpCode::Mul, 0.5, true) != t4) return false;
    nodes->insert(nodes->end(), {r3, half});
  } else if (is_scalar_near(g, other, 0.5)) {  // x * (t3 * 0.5)
    const int t5 = mul3.outputs[0];
    const int outer = sole_reader(g, users, t5);
    if (outer < 0 || !is_binary(g.nodes[static_cast<size_t>(outer)], OpCode::Mul) ||
        other_operand(g.nodes[static_cast<size_t>(outer)], t5) != x) {
      return false;
    }
    nodes->insert(nodes->end(), {r3, outer});
  } else {  // (x * 0.5) * t3
    if (other < 0 || sole_reader(g, users, other) != r3) return false;
    const int half = g.values[static_cast<size_t>(other)].producer;
    if (half < 0 || beside_scalar(g, g.nodes[static_cast<size_t>(half)], OpCode::Mul, 0.5, true) != x) return false;
    nodes->insert(nodes->end(), {half, r3});
  }
  return true;
}

// Either form around erf or tanh node `u`, or false.
bool match_gelu(const Graph& g, const Users& users, int u, Match* m) {
  const Node& unary = g.nodes[static_cast<size_t>(u)];
  if ((unary.op != OpCode::Erf && unary.op != OpCode::Tanh) || unary.inputs.size() != 1 || unary.outputs.size() != 1) {
    return false;
  }
  m->nodes.clear();
  m->approx = unary.op == OpCode::Erf ? GeluApprox::None : GeluApprox::Tanh;
  m->x = m->approx == GeluApprox::None ? match_erf_head(g, users, u, &m->nodes) : match_tanh_head(g, users, u, &m->nodes);
  if (m->x < 0) return false;
  m->nodes.push_back(u);
  if (!match_tail(g, users, u, m->x, &m->nodes)) return false;

  // Every value the nodes write is f32 with x's dims: a [1, 1] constant would have broadcast a
  // rank-1 x to [1, N], which gelu(x) would not reproduce.
  const Value& xv = g.values[static_cast<size_t>(m->x)];
  if (xv.dtype != ScalarType::F32) return false;
  for (int n : m->nodes) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    if (node.outputs.size() != 1) return false;
    const Value& out = g.values[static_cast<size_t>(node.outputs[0])];
    if (out.dtype != ScalarType::F32 || out.dims != xv.dims) return false;
  }
  return true;
}

}  // namespace

int fuse_gelus(Graph& graph) {
  const Users users = graph.users();
  // Single-reader intermediates already keep matches apart; this makes it independent of that.
  std::vector<char> claimed(graph.nodes.size(), 0);
  int fused = 0;
  Match m;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!match_gelu(graph, users, static_cast<int>(n), &m)) continue;
    bool free = true;
    for (int k : m.nodes) free = free && !claimed[static_cast<size_t>(k)];
    if (!free) continue;
    for (int k : m.nodes) claimed[static_cast<size_t>(k)] = 1;
    // The last node becomes gelu(x) in place: x is written before the first of the nodes, so the
    // order stays topological, and y keeps its id, name and readers. The other nodes are now
    // unread, and go with the dead code.
    Node& out = graph.nodes[static_cast<size_t>(m.nodes.back())];
    out.op = OpCode::Gelu;
    out.attrs = OpAttrs{};
    out.attrs.kind = AttrKind::Gelu;
    out.attrs.gelu_approx = m.approx;
    out.inputs = {m.x};
    out.source_op = "gelu_fusion";  // the debug segment's record of where the node came from
    ++fused;
  }
  if (fused > 0) remove_dead_code(graph);
  return fused;
}

}  // namespace ember::exporter
