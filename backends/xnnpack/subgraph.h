// Translation of a GRAPH payload into an XNNPACK subgraph (internal to backends/xnnpack).
//
// Ember tensors are logical NCHW; XNNPACK's CNN operators want NHWC. Every 4-D graph input is taken
// as an image and transposed to NHWC once, at the edge (execute()), and everything inside stays NHWC
// until a graph output, which is transposed back. Values of other ranks are "plain": their memory is
// the same in both worlds. The pass below decides each value's layout and refuses (NotSupported,
// naming the instruction) what XNNPACK would compute differently from kernels/reference.
//
// The same pass runs twice: without a subgraph it only checks and sizes (plan_memory(), no
// allocation), with one it defines the nodes (init()). Both walk the instructions in the same order,
// so the packed-weight bytes they find are equal by construction.
#pragma once

#include <xnnpack.h>

#include <cstddef>
#include <cstdint>

#include "runtime/core/status.h"
#include "runtime/core/tensor_view.h"
#include "runtime/program/graph_view.h"

namespace ember::backends::xnnpack {

constexpr uint32_t kMaxValues = 4096;  // per delegate graph (the per-value tables live on the stack)
constexpr size_t kMaxIo = 64;          // graph inputs and outputs, each

// One graph input or output: its staging slot and whether it crosses the NCHW <-> NHWC edge.
struct IoSlot {
  uint32_t value = 0;     // value index in the graph
  bool nhwc = false;      // 4-D image: transposed at the edge
  uint8_t rank = 0;
  int64_t dims[kMaxRank] = {0};  // logical (NCHW) dims, all static
  uint64_t bytes = 0;
  float* staging = nullptr;      // fixed slot handed to xnn_setup_runtime once (init)
};

// What a translation needs beyond the graph. In the checking pass `subgraph` and `block` are null.
struct Translation {
  xnn_subgraph_t subgraph = nullptr;
  // staging_bytes + weights_bytes of host memory (64-aligned), sized by the checking pass: the
  // staging slots (inputs, then outputs), then the packed weights in instruction order.
  uint8_t* block = nullptr;
  // transient_bytes of host memory for the conv weights in OHWI: XNNPACK packs them into its own
  // buffers while the runtime is created, so init() frees this right after.
  uint8_t* transient = nullptr;
  IoSlot inputs[kMaxIo];
  IoSlot outputs[kMaxIo];
  uint32_t input_count = 0;
  uint32_t output_count = 0;
  // Results of the pass.
  uint64_t weights_bytes = 0;     // constant operands of elementwise ops, copied (64-aligned each)
  uint64_t transient_bytes = 0;   // conv weights in OHWI (64-aligned each), only during init()
  uint64_t staging_bytes = 0;     // every input and output slot (64-aligned each)
};

// Checks (and with t.subgraph set, defines) the whole graph. Errors: NotSupported naming the
// instruction and the reason (an op, attribute, layout or symbolic dim XNNPACK cannot run as
// kernels/reference does; an xnn_define_* refusal, with its xnn_status name), OutOfMemory.
Status translate(const GraphView& graph, Translation& t, ErrorContext* error);

// "xnn_status_invalid_parameter", ...; never null.
const char* status_name(xnn_status status);

// Maps a failed XNNPACK call to a Status that names it and its xnn_status: out_of_memory ->
// OutOfMemory, invalid / unsupported parameter -> NotSupported, anything else -> BackendFailed.
Status xnn_failure(ErrorContext* error, xnn_status status, const char* call, const char* where);

}  // namespace ember::backends::xnnpack
