// Where runner makes up an input (no --input for it): the values it may take without failing. An
// integer input that indexes a table (a gather's indices, an embedding's ids), directly or through
// casts, reshapes, slices and the like, draws below the table's size; other integer inputs (masks,
// token type ids) draw 0 or 1; floats draw from [-1, 1). Issue 17: random ids up to 16 could fall
// outside a small vocabulary, and masks of 0..15 are not masks.
#pragma once

#include <cstdint>
#include <string>

#include "schema/program_generated.h"

namespace ember::tools {

struct InputRange {
  int64_t lo = 0, hi = 2;  // integers: uniform in [lo, hi)
  std::string why;          // "indices of gather 'emb' (30522 rows)", "not an index: 0 or 1"
};

// The range for graph input `input` (its index in graph.inputs) of a method's graph.
InputRange integer_input_range(const fb::Graph& graph, uint32_t input, const fb::DebugInfo* debug);

}  // namespace ember::tools
