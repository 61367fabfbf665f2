// Non-finite weights: finds NaN and ±Inf in a graph's constants (f32, f16, bf16, f64, FP8 codes and
// the scales of quantized constants) before they reach a program, where they would only show up as
// garbage tokens or NaN outputs at run time. The pipeline runs it on the imported constants and
// again on the ones the passes made (folding, quantization). Host-only; throws nothing itself.
//
// Cost: one pass over each constant's bytes (a branch-free count the compiler vectorizes; the first
// index is searched only when the count is not zero), a few hundred ms for a multi-GB checkpoint.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "exporter/ir/graph.h"

namespace ember::exporter {

struct NonFiniteTensor {
  std::string name;       // the value (the checkpoint tensor / ONNX initializer / folded value)
  std::string what;       // "f32[64]", or "f8_e4m3fn[256, 128] scale" for a quantized constant's scales
  uint64_t count = 0;     // non-finite elements
  uint64_t numel = 0;
  uint64_t first = 0;     // index of the first one (row-major)
  std::string first_value;  // "nan", "inf", "-inf", or "NaN code 0x7f" for FP8/e8m0/ue4m3 codes
};

struct WeightCheck {
  std::vector<NonFiniteTensor> tensors;  // in value order
  uint64_t tensors_checked = 0, bytes_checked = 0;
  // One line: the first `max_listed` offenders ("'model.norm.weight' f32[64]: 2 of 64 non-finite,
  // first at index 5 (nan)") joined by "; ", then "(N tensors in all)" when there are more.
  std::string format(size_t max_listed = 3) const;
};

// Scans every constant of `graph` whose bytes are not in `*seen` (shared bytes, as a tied LM head
// has, are scanned once) and adds the scanned ones to it. `seen` may be null. NaN is reported in
// every constant; ±Inf only in weights (is_weight_input: the parameters of MatMul / Linear / Conv2d
// / the norms / Rope / Embedding, and quantized values and their scales), since a mask's -inf fill
// value or a bound is a legitimate constant.
WeightCheck check_weights(const Graph& graph, std::set<const void*>* seen = nullptr);

// Whether input `input` of an `op` node holds learned parameters (weights, biases, norm scales).
bool is_weight_input(OpCode op, size_t input);

// Non-finite elements among `count` elements of `dtype` at `data` (types without NaN or Inf, and
// integers, have none); NaNs only unless `include_inf`. Sets *first to the first one's index when
// there is one.
uint64_t count_non_finite(ScalarType dtype, const uint8_t* data, uint64_t count, uint64_t* first,
                          bool include_inf = true);

// How non-finite element i reads: "nan", "inf", "-inf", or "NaN code 0x7f" (FP8, e8m0, ue4m3).
std::string non_finite_text(ScalarType dtype, const uint8_t* data, uint64_t i);

}  // namespace ember::exporter
