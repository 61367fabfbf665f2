// An independent check of a serialized program's memory plan. It reads the .pte bytes through the
// generated FlatBuffers accessors only (never the planner's data structures), recomputes liveness
// from instruction order and reports every violation:
//  - two Planned values of one Method, live at a common instruction, whose [offset, offset + nbytes)
//    ranges in the same arena intersect;
//  - a Planned range outside its arena (or naming an arena the Method does not have).
// Liveness: a Method input is live from instruction 0, an output until the last instruction, any
// other value from its first write to its last read (or write). The Planned values of a GRAPH
// delegate's payload (its internals) are live exactly at the instructions that call that delegate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::exporter {

// Human-readable violations; empty when the plan is sound. A file that does not parse (header,
// FlatBuffers verifier) yields one violation saying so.
std::vector<std::string> check_overlaps(const uint8_t* file, size_t size);
inline std::vector<std::string> check_overlaps(const std::vector<uint8_t>& file) {
  return check_overlaps(file.data(), file.size());
}

}  // namespace ember::exporter
