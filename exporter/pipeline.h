// The exporter pipeline (docs/DESIGN.md §5): passes (batch-norm folding, constant folding, conv clamp fusion,
// dead code, GELU fusion, quantization) -> partition -> plan -> serialize, on an imported Graph.
// Layout: activations stay logical NCHW (contiguous); channels-last is a backend concern (a delegate
// converts inside its payload), so there is no layout pass. Host-only; throws ExportError.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "exporter/ir/graph.h"
#include "exporter/partition/manifest.h"
#include "exporter/partition/partitioner.h"
#include "exporter/passes/batch_norm_folding.h"
#include "exporter/passes/constant_folding.h"
#include "exporter/passes/conv_clamp_fusion.h"
#include "exporter/passes/gelu_fusion.h"
#include "exporter/passes/quantize.h"
#include "exporter/passes/weight_check.h"
#include "exporter/plan/memory_planner.h"
#include "exporter/serialize/serializer.h"

namespace ember::exporter {

struct ExportOptions {
  std::vector<std::string> backends{kPortableBackend};  // priority order; portable is always the fallback
  // nullptr: no capability check, every node on the portable kernels (only with backends = portable).
  const CapabilityManifest* manifest = nullptr;
  bool fold_constants = true;
  // passes/gelu_fusion.h, after folding and dead code, before quantization. Off only to compare a
  // program with its unfused twin (the tests do).
  bool fuse_gelu = true;
  bool strip_debug = false;
  std::string method_name = "forward";  // "step" for LLM programs (docs/DESIGN.md §6)
  std::optional<QuantizeOptions> quantize;  // after folding, before partitioning
  // LLM programs: the tokenizer and facts to embed (SerializeOptions::llm). Borrowed for the call.
  const LlmProgramInfo* llm = nullptr;
  // NaN / ±Inf in a constant (passes/weight_check.h; checked on the imported constants, before
  // any pass can hide them, and on the ones the passes make): false = ExportError naming the first
  // offenders; true (exporter --allow-non-finite-weights) = exported, with a line in `warnings`.
  bool allow_non_finite_weights = false;
  // passes/conv_clamp_fusion.h, after constant folding (exporter --no-conv-clamp-fusion: off, to
  // compare a program with its unfused twin).
  bool fuse_conv_clamps = true;
  // Compile specs for the delegates of a backend (SerializeOptions::compile_specs). ExportError when
  // a spec's backend is not in `backends`, when no delegate went to it, or when one backend has a
  // key twice.
  std::vector<CompileSpecOption> compile_specs;
  // When set, export_graph writes the step it is in ("checking weights", "folding constants",
  // "quantizing", "partitioning", "planning memory", "serializing") for the CLI's out-of-memory
  // message. Borrowed for the call.
  std::string* stage = nullptr;
};

struct ExportResult {
  Graph graph;  // after the passes
  FoldStats fold;
  int conv_clamps_fused = 0;  // relu / clip nodes folded into their conv2d
  int batch_norms_folded = 0;
  int dead_nodes_removed = 0;
  int gelus_fused = 0;
  std::optional<QuantizeReport> quantize;
  Partition partition;
  MemoryPlan plan;
  SerializedProgram program;
  WeightCheck weights;                // non-finite constants found (only with allow_non_finite_weights)
  std::vector<std::string> warnings;  // one line each, without a prefix
  double seconds = 0;
};

ExportResult export_graph(Graph graph, const ExportOptions& options);

// The multi-line report the CLI prints: op histogram, the instruction count per kind and backend,
// weight bytes, arena sizes and the planner line; `instructions` adds one line per instruction
// (instruction -> backend; `exporter --verbose`).
std::string format_summary(const ExportResult& result, bool instructions = false);

}  // namespace ember::exporter
