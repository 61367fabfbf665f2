// The quantization pass (docs/DESIGN.md §4-5): replaces the f32 weights of `linear` nodes by quantized
// constants (codes + scales, runtime/core/quant.h), selectively, and reports per layer how much
// signal survives. Weights are quantized by kernels/reference/quantize.h, so the file holds exactly
// what the reference quantizers produce (tests/exporter/quantize_test checks it against numpy).
//
// Presets (exporter options, not schema):
//   fp8          f8_e4m3fn weights, one f32 scale per output channel; weight-only
//   fp8-block    f8_e4m3fn weights, f32 scale per 128x128 block; weight-only
//   fp8-dynamic  fp8 weights (per channel) and FP8 activations quantized per token at run time (W8A8)
//   mxfp8        f8_e4m3fn weights, e8m0 scale per 32 along K (RCEIL); weight-only
//   nvfp4        f4_e2m1 weights, ue4m3 scale per 16 along K and an f32 global scale; weight-only
//
// Selection: every linear with a constant f32 weight [N, K] is a candidate. It is skipped when
// min(N, K) < min_size (too small to profit: the scales and the decode cost eat the bandwidth
// saved), when K does not fit the format's block (mxfp8: K % 32, nvfp4: K % 16), or when its node
// name matches an exclude pattern; an include pattern, when any is given, limits quantization to the
// layers it matches and overrides the size rule for them. Patterns are shell globs (`*`, `?`) over
// node names. Embeddings (gather) and norms are never linears, so they stay f32. A weight with a NaN
// or ±Inf is kept as it is (its scales would be NaN; the pipeline lets one through only with
// ExportOptions::allow_non_finite_weights).
//
// Report: per candidate layer, the weight SQNR (10·log10(Σw² / Σ(w − ŵ)²), dB; inf when exact) and,
// when sample inputs are evaluated, the output SQNR of that layer's output in the quantized model
// against the f32 model on the same inputs (the quantized model simulated on the reference
// evaluator: weights dequantized exactly as the kernels do, FP8 per-token activations for W8A8).
#pragma once

#include <string>
#include <vector>

#include "exporter/ir/graph.h"
#include "exporter/passes/constant_folding.h"
#include "exporter/passes/evaluate.h"

namespace ember::exporter {

enum class QuantPreset { Fp8, Fp8Block, Fp8Dynamic, Mxfp8, Nvfp4 };

// "fp8", "fp8-block", "fp8-dynamic", "mxfp8", "nvfp4"; throws ExportError listing them otherwise.
QuantPreset parse_quant_preset(const std::string& name);
const char* to_string(QuantPreset preset);

struct QuantizeOptions {
  QuantPreset preset = QuantPreset::Fp8;
  int64_t min_size = 128;
  std::vector<std::string> include;  // node-name globs; empty = every candidate
  std::vector<std::string> exclude;
  // Inputs (graph.inputs order) on which to measure output SQNR; when empty, `random_samples`
  // inputs from make_sample_inputs (seeds 1, 2, ...) are used; 0 of both = weight SQNR only.
  std::vector<std::vector<HostTensor>> samples;
  int random_samples = 0;
};

struct QuantLayerReport {
  std::string node;
  int64_t n = 0, k = 0;
  bool quantized = false;
  std::string skipped;        // why not, when !quantized
  double weight_sqnr_db = 0;  // when quantized
  double output_sqnr_db = 0;  // when quantized and samples were given (else NaN)
};

struct QuantizeReport {
  QuantPreset preset = QuantPreset::Fp8;
  std::vector<QuantLayerReport> layers;
  uint64_t f32_weight_bytes = 0;        // of the quantized layers, before
  uint64_t quantized_weight_bytes = 0;  // codes + scales, after
  std::string samples_note;             // how the output SQNR was measured, or why it was not
};

// Quantizes `graph` in place. Throws ExportError for a malformed pattern or an internal error.
QuantizeReport quantize_graph(Graph& graph, const QuantizeOptions& options);

// Deterministic sample inputs for the report: f32 inputs N(0, 1), integer inputs uniform in [0, 8),
// bool inputs true, every symbolic dim at its symbol's min (at least 1).
std::vector<HostTensor> make_sample_inputs(const Graph& graph, uint32_t seed);

// The per-layer table the CLI prints.
std::string format_quantize_report(const QuantizeReport& report);

}  // namespace ember::exporter
