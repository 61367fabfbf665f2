// Semantic validation of a verified program (schema/README.md lists every rule). Runs after the
// FlatBuffers verifier and before any pointer is derived from the file, so the executor and
// backends may index values, arenas and segments without further checks.
#pragma once

#include "runtime/core/span.h"
#include "runtime/core/status.h"
#include "runtime/program/graph_view.h"
#include "runtime/program/program_file.h"

namespace ember {

// InvalidProgram (or FeatureMissing / NotSupported) with the first problem in ctx: what, where
// (method, value, instruction) and which value.
Status validate_program(const fb::Program& program, const FileHeader& header,
                        Span<const SegmentData> segments, ErrorContext* ctx);

// Validates one delegate GRAPH payload for the method `method` (used by validate_program).
Status validate_delegate_graph(const fb::Graph& graph, const fb::Program& program,
                               const fb::Method& method, Span<const SegmentData> segments,
                               ErrorContext* ctx);

// Bytes of a tensor at its max dims; false on overflow or invalid dtype.
bool tensor_max_nbytes(const fb::Tensor& tensor, uint64_t* out);

}  // namespace ember
