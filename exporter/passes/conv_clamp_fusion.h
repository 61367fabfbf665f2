// Conv clamp fusion (issue 16): a relu or clip that reads a conv2d's output is folded into the conv
// as its output clamp (OpAttrs::out_min / out_max, schema Conv2dAttrs), saving a full pass over the
// activation. Kernels compute the clamp exactly as the separate op (NaN stays NaN, -0 stays -0), so
// the result is bitwise that of the unfused graph. Host-only.
#pragma once

#include "exporter/ir/graph.h"

namespace ember::exporter {

// The pass: every relu (clamp [0, +inf]) or clip (its [clip_min, clip_max]; the IR holds them as
// attributes, so they are constants) whose input x is an f32 conv2d output read by no other node and
// not a graph output is removed; the conv takes the clamp (intersected with one it already has, so
// conv -> relu -> clip chains fuse whole) and the clip's readers and graph outputs read x. Not fused:
// a clip with NaN bounds or min > max, or one whose intersection with the conv's clamp is empty (the
// validator requires out_min <= out_max). Dead values are dropped. Returns the number fused.
int fuse_conv_clamps(Graph& graph);

}  // namespace ember::exporter
