// GELU fusion: the exact (erf) GELU that torch.onnx.export writes as five nodes (nn.GELU() before
// opset 20, Hugging Face's `x * 0.5 * (1 + erf(x / sqrt(2)))`) becomes one gelu node
// (GeluApprox::None), so the runtime makes one pass over the tensor instead of five. Matched forms
// (any operand order of each add and mul):
//   t1 = div(x, sqrt(2))  or  mul(x, 1/sqrt(2));   t2 = erf(t1);   t3 = add(t2, 1)
//   y  = mul(mul(x, t3), 0.5)  or  mul(mul(x, 0.5), t3)  or  mul(x, mul(t3, 0.5))
// Each constant is an f32 constant of one element (a scalar or [1], [1, 1], ...) within a relative
// 1e-6 of its value; x, every intermediate and y are f32 with x's dims (so no constant broadcasts
// the result to another shape); every intermediate has exactly one reader and is not a graph
// output (x may have other readers). The node that wrote y becomes gelu(x) (its name kept), so y's
// id, name and readers stay. The tanh form is not matched. Host-only; never throws for a graph that
// passes Graph::check_structure().
#pragma once

#include "exporter/ir/graph.h"

namespace ember::exporter {

// The pass. Returns the number of GELUs fused; when it is > 0, remove_dead_code (constant_folding.h)
// then drops the replaced nodes and the constants only they read (and any other dead code, so run
// it after the pipeline's own dead-code removal) and renumbers ids. When 0, the graph is unchanged.
int fuse_gelus(Graph& graph);

}  // namespace ember::exporter
