// Memory planning (docs/DESIGN.md §5): lifetime intervals over the Method's instructions, greedy by size
// (largest first, lowest offset that collides with no already-placed value live at the same time),
// 64-byte alignment and a 64-byte tail pad per tensor, upper-bound (max) shapes.
//
// Arenas: kActivationArena for intermediates (including the internal values of GRAPH delegates,
// live during their DelegateCall only), kIoArena for the Method's inputs then outputs, laid out
// contiguously in that order (64-aligned each, same tail pad). Constants are not planned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exporter/ir/graph.h"
#include "exporter/partition/partitioner.h"

namespace ember::exporter {

constexpr int kActivationArena = 0;
constexpr int kIoArena = 1;
constexpr uint64_t kPlanAlignment = 64;
constexpr uint64_t kTailPad = 64;

struct Placement {
  int arena = -1;        // -1 = not planned (constants, values no instruction touches)
  uint64_t offset = 0;
  uint64_t nbytes = 0;   // upper-bound bytes (no pad)
  uint32_t first = 0;    // Method instruction indices where the value is live
  uint32_t last = 0;
};

struct MemoryPlan {
  std::vector<Placement> values;  // indexed by graph value id
  uint64_t activation_size = 0;   // planned peak of the Activation arena
  uint64_t io_size = 0;
  // max over instructions of the padded bytes of the intermediates live there: no plan can do better.
  uint64_t live_lower_bound = 0;
  // "planned peak N bytes, live-bytes lower bound M bytes (ratio R)".
  std::string summary() const;
};

// Bytes a tensor of `nbytes` occupies in an arena: aligned up to 64, plus the 64-byte tail pad.
uint64_t slot_bytes(uint64_t nbytes);

MemoryPlan plan_memory(const Graph& graph, const Partition& partition);

}  // namespace ember::exporter
