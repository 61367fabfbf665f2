// Constant folding: evaluates (with the reference kernels) every node whose inputs are all constants
// and whose outputs are not graph outputs, turning its outputs into constants; then drops constants
// nobody reads. Node and value order is kept; ids are renumbered.
#pragma once

#include "exporter/ir/graph.h"

namespace ember::exporter {

struct FoldStats {
  int folded_nodes = 0;
  int removed_constants = 0;
};

FoldStats fold_constants(Graph& graph);

// Removes nodes whose outputs nobody reads (and that are not graph outputs), then values that are
// no longer referenced (except graph inputs), also when no node was removed. Renumbers ids. Returns
// the number of nodes removed.
int remove_dead_code(Graph& graph);

}  // namespace ember::exporter
