// The CUDA backend's memory and bucket plan (backends/cuda/README.md, "Memory plan"): pure host
// code over a graph, no GPU and no allocation, so plan_memory() and init() compute the same bytes
// and the host tests (tests/backends/cuda/cuda_plan_test.cc) run in CI.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/core/status.h"
#include "runtime/kernel/kernel_registry.h"
#include "runtime/program/graph_view.h"

namespace ember::backends::cuda {

constexpr uint64_t kAlign = 256;               // device allocations: cuBLASLt wants 16, vectors 128
constexpr uint64_t kLtWorkspace = 32ull << 20;  // NVIDIA's recommendation for Hopper (notes §1.1)
constexpr uint64_t kStatusBytes = 256;          // the device error word, in its own line
constexpr size_t kMaxBuckets = 128;

inline uint64_t align_up(uint64_t n, uint64_t a = kAlign) { return (n + a - 1) / a * a; }

// The CUDA kernels' registry (ops/register.cc), built once.
const KernelRegistry& registry();

// ---- The LLM step's inputs (docs/DESIGN.md §6): how a bucket pads them. ---------------------------------

enum class Pad : uint8_t {
  None,        // not an LLM step input: the graph is not bucketed
  Zero,        // token_ids, positions, block_tables, temperature, top_k, seed, sample_position
  MinusOne,    // slot_mapping (no write), logits_indices (a zero row)
  One,         // top_p, repetition_penalty (off), as f32
  QueryStart,  // query_start: the last value repeated (empty sequences)
  Unread,      // history: rows of padding sequences (history_len 0) and columns past history_len
};

// The rule for a graph input named `name` (Pad::None: not an LLM step input).
Pad pad_of(const char* name);

// ---- The memory plan: one function for plan_memory() and init(). --------------------------------

// Where a value lives: internal values in the planned arena, constants uploaded, I/O in staging slots.
enum class Slot : uint8_t { None, Value, Constant, Io, State };
Slot slot_of(const GraphView& graph, uint32_t v);

struct Buckets {
  bool llm = false;          // an LLM step: (T, S) buckets
  uint16_t sym_t = 0, sym_s = 0, sym_s1 = 0;  // 1-based symbol ids (0 = none)
  int64_t max_t = 0, max_s = 0;
  uint32_t count = 0;
  int64_t t[kMaxBuckets] = {}, s[kMaxBuckets] = {};
  bool eager = false;        // symbols outside the LLM step's: launched per call, not captured
};

struct Layout {
  size_t runner_bytes = 0;
  uint64_t value_bytes = 0;     // the lifetime-planned arena (values and fused-quantization buffers)
  uint32_t fused_count = 0;     // FusedGroups
  uint64_t constant_bytes = 0;
  uint64_t io_bytes = 0;        // device staging of inputs and outputs (and the same in pinned memory)
  uint64_t scratch_bytes = 0;   // the kernels' device scratch (the largest ScratchFn)
  uint64_t workspace_bytes = 0; // cuBLASLt
  uint64_t device_bytes = 0;    // all of the above + the status word
  uint64_t pinned_bytes = 0;
  uint64_t host_bytes = 0;      // runner + per-value offsets (besides the handle itself)
  Buckets buckets;
};

// Dim d's symbol (1-based; 0 = static), and a symbol's max.
uint16_t dim_sym(const fb::Tensor& t, uint32_t d);
int64_t symbol_max(const fb::Graph& g, uint16_t sym);

// The compile specs the backend understands (README "Buckets"): each a comma-separated, strictly
// ascending list of positive integers, the T (tokens per step) or S (sequences per step) values of
// the buckets in place of the fixed rule's powers of two.
constexpr const char* kSpecTokens = "buckets.tokens";
constexpr const char* kSpecSeqs = "buckets.seqs";

// The (T, S) buckets of an LLM step; one for a graph without symbols; eager for other symbols.
// Without bucket specs, the fixed rule (README "Buckets"): T and S over powers of two up to their
// max, S beyond T once, and past T = 64 an S below T / 8 only 1, 4, 16, 64 or the max. With
// buckets.tokens and/or buckets.seqs, that list (the graph's max appended when missing) replaces the
// powers of two of its dim, and the buckets are every (T, S) of the two lists but S beyond T once
// (no thinning). Errors: InvalidArgument for an unknown or repeated key, a bucket spec on a graph
// that is not an LLM step, and a bad list (empty, an entry that is not a positive decimal integer,
// not ascending, above the graph's max, or more than kMaxBuckets (T, S) buckets in all), the
// message naming the key, the value and why; NotSupported when the fixed rule makes more than
// kMaxBuckets. Deterministic: plan_memory() and init() get the same buckets for the same specs.
Status plan_buckets(const GraphView& graph, Span<const CompileSpec> specs, Buckets* b, ErrorContext* ctx);
// W8A8 quantization fused into its producer (ops/cuda_ops.h FusedQuant): an rms_norm / silu_mul
// whose f32 output [rows, k] (an internal value written by it alone) feeds at least one linear with
// FP8 per-tensor / per-channel weights and per-token FP8 activations.
struct FusedGroup {
  uint32_t producer = 0;     // instruction
  uint32_t value = 0;        // its output
  uint32_t last_use = 0;     // the last instruction reading the buffer
  int64_t rows = 0, k = 0;   // at the max shapes
  uint64_t bytes = 0;        // the buffer: scales, then the rows (f32 values up to 8 rows, else codes)
  uint64_t scales_bytes = 0; // the scales' part (256-aligned)
};
constexpr uint32_t kMaxFused = 1024;
// The groups in instruction order (at most kMaxFused; later candidates are left unfused).
uint32_t plan_fused(const GraphView& graph, FusedGroup* groups);
// Whether instruction i is a linear that reads group g's buffer.
bool reads_fused(const GraphView& graph, uint32_t i, const FusedGroup& g);

// The lifetime-planned arena of the internal values and the fused groups' buffers: its bytes, each
// value's offset into `offsets` and each group's into `group_offsets` (either may be null: sizing
// only). Deterministic.
uint64_t plan_values(const GraphView& graph, uint64_t* offsets, const FusedGroup* groups = nullptr,
                     uint32_t group_count = 0, uint64_t* group_offsets = nullptr);
// The whole layout (what plan_memory() reports and init() takes), for the delegate's compile specs.
Status plan(const GraphView& graph, Span<const CompileSpec> specs, Layout* l, ErrorContext* ctx);
// The layout as MemoryRequirements by purpose: host "handle" (`handle_bytes`, the DelegateHandle
// this file cannot see) and "runner"; device "weights" (constants), "values", "io staging",
// "scratch", "cublaslt workspace", "status"; pinned "io staging" and "status". graph_count: the
// buckets captured at init (0 when eager). plan_memory() and memory_requirements() both report
// this, so they agree by construction; the totals equal the layout's (tests check).
MemoryRequirements requirements(const Layout& l, uint64_t handle_bytes);

}  // namespace ember::backends::cuda
