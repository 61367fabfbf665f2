// GELU fusion: the GELUs that torch.onnx.export writes as chains of elementwise nodes (nn.GELU()
// before opset 20's Gelu op, Hugging Face's `x * 0.5 * (1 + erf(x / sqrt(2)))` and `gelu_new`)
// become one gelu node, so the runtime makes one pass over the tensor instead of five to nine.
// Matched forms (any operand order of each add and mul):
//   exact (GeluApprox::None):  u = erf(div(x, sqrt(2)))  or  erf(mul(x, 1/sqrt(2)))
//   tanh  (GeluApprox::Tanh):  u = tanh(mul(sqrt(2/pi), add(x, mul(0.044715, c)))), where
//                              c = mul(x, mul(x, x))  or  pow(x, 3)
//   then t = add(u, 1) and  y = mul(mul(x, t), 0.5)  or  mul(mul(x, 0.5), t)  or  mul(x, mul(t, 0.5))
// Each constant is an f32 constant of one element (a scalar or [1], [1, 1], ...) within a relative
// 1e-6 of its value; x, every intermediate and y are f32 with x's dims (so no constant broadcasts
// the result to another shape); every intermediate has exactly one reader and is not a graph
// output (x may have other readers). The node that wrote y becomes gelu(x) (its name kept), so y's
// id, name and readers stay. Host-only; never throws for a graph that passes
// Graph::check_structure().
#pragma once

#include "exporter/ir/graph.h"

namespace ember::exporter {

// The pass. Returns the number of GELUs fused; when it is > 0, remove_dead_code (constant_folding.h)
// then drops the replaced nodes and the constants only they read (and any other dead code, so run
// it after the pipeline's own dead-code removal) and renumbers ids. When 0, the graph is unchanged.
int fuse_gelus(Graph& graph);

}  // namespace ember::exporter
