// Bundled example models built with GraphBuilder, weights seeded (same seed, same bytes).
//  mlp: x [batch: 1..8, 64] -> linear 64->128, gelu, linear 128->128, relu, linear 128->10, softmax
//  cnn: image [1, 3, 32, 32] -> conv 3->16 3x3 pad 1, relu, maxpool 2, depthwise conv 16 3x3 pad 1,
//       pointwise conv 16->32, relu, global avg pool, reshape [1, 32], linear 32->10, softmax
//  paged attention (tests and the fuzz seeds, not a CLI example): q [T, 4, 8], k, v [T, 2, 8],
//       slot_mapping [T], block_tables [S, 4], context_lens [S], query_start [S1], logits_indices [S]
//       (T <= 8, S <= 2) -> logits_gather(reshape(paged_attention(...), [T, 32])) with the KV cache as
//       program state kv.0.k / kv.0.v [num_blocks <= 16, 4, 2, 8] of `cache_dtype`
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exporter/ir/graph.h"

namespace ember::exporter {

Graph build_mlp_example(uint64_t seed);
Graph build_cnn_example(uint64_t seed);
// cache_as_state false makes the K cache a graph input (a program the exporter must refuse).
Graph build_paged_attention_example(ScalarType cache_dtype, bool cache_as_state = true);
// "mlp" or "cnn"; throws ExportError listing the names otherwise.
Graph build_example(const std::string& name, uint64_t seed);
std::vector<std::string> example_names();

}  // namespace ember::exporter
