// BatchNorm folding: an inference batch norm y = (x - mean) * scale / sqrt(var + eps) + bias that
// follows a conv2d or linear (channel axis 1 of its output) whose weight and bias are f32 constants,
// and whose output nobody else reads, is folded into that op's weight and bias:
//   s = scale / sqrt(var + eps);  w'[o, ...] = w[o, ...] * s[o];  b'[o] = (b[o] - mean[o]) * s[o] + bias[o]
// computed in double and rounded once to f32. New constants are created (the old ones may be
// shared). Host-only; throws ExportError on malformed parameters.
#pragma once

#include <vector>

#include "exporter/ir/graph.h"

namespace ember::exporter {

struct BatchNormParams {
  std::vector<double> scale, bias, mean, var;  // [C] each
  double epsilon = 1e-5;
};

// Folds `params` into node `producer` (conv2d with w [O, ...] or linear with w [N, K] and a rank-2
// output) when its weight (and bias, if any) are f32 constants and the channel count matches;
// rewrites the node's weight and bias inputs to new constants appended to the graph. Returns false
// (graph unchanged) when not foldable. Does not check the producer's other users: callers do.
bool fold_batch_norm_into(Graph& graph, int producer, const BatchNormParams& params);

// The pass: every batch_norm node whose input comes from a foldable conv2d/linear with no other
// reader (and is not a graph output) and whose scale/bias/mean/var are f32 constants is removed; its
// readers (and graph outputs) read the producer's output instead. Dead values are dropped. Returns
// the number folded.
int fold_batch_norms(Graph& graph);

// Reads the [C] f32 constant parameters of a batch_norm node (inputs 1..4); false if any is not an
// f32 constant of rank 1 with the same length.
bool batch_norm_params(const Graph& graph, const Node& node, BatchNormParams* out);

}  // namespace ember::exporter
