// An IR evaluator on the reference kernels (kernels/reference): the numerical oracle for constant
// folding and for end-to-end tests. Shapes come from the ops' ShapeFns with the symbol values bound
// by the actual input dims. Host-only; throws ExportError.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "exporter/ir/graph.h"

namespace ember::exporter {

// A dense, owned tensor.
struct HostTensor {
  ScalarType dtype = ScalarType::Invalid;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  std::shared_ptr<const QuantParams> quant;  // a quantized weight's scales (exporter/ir/graph.h)

  uint64_t numel() const {
    uint64_t n = 1;
    for (int64_t d : dims) n *= static_cast<uint64_t>(d);
    return n;
  }
  static HostTensor from_f32(std::vector<int64_t> dims, const std::vector<float>& values);
  // Precondition: dtype is F32.
  std::vector<float> to_f32() const;
};

// The largest tensor the evaluator (and the importers' export-time evaluation) materializes: 64 GiB.
// A larger output fails naming the node instead of reaching the allocator.
constexpr uint64_t kMaxEvaluatedBytes = uint64_t{1} << 36;

// Thrown by evaluate_node when the op's input check (OpInfo::check_inputs) rejects the input values
// (an index out of range): the graph would fail the same way at run time, so an importer folding
// constants reports it instead of keeping the node.
class InputValueError : public ExportError {
 public:
  using ExportError::ExportError;
};

// Runs one node on `inputs` (nullptr = absent optional input). `symbols[i]` = value of symbol i + 1.
std::vector<HostTensor> evaluate_node(const Node& node, const std::vector<const HostTensor*>& inputs,
                                      const std::vector<int64_t>& symbols);

// Runs the whole graph. `inputs` follow graph.inputs; their dtypes must match and their dims must
// fit (static dims equal, symbolic dims within the symbol's bounds, one symbol one value). Returns
// the outputs in graph.outputs order.
std::vector<HostTensor> evaluate(const Graph& graph, const std::vector<HostTensor>& inputs);

struct EvaluateOptions {
  // Constants (value id -> tensor) used instead of the graph's data (a simulated quantized model).
  const std::map<int, HostTensor>* constants = nullptr;
  // Called before node `n` runs with the tensors it reads (nullptr = absent); may point an entry at a
  // tensor pushed onto `keep` (reserved for one per input), which lives until the node has run.
  std::function<void(size_t n, std::vector<const HostTensor*>& inputs, std::vector<HostTensor>& keep)> before_node;
};

// Like evaluate, but returns every value by id: inputs, constants and computed values (null for a
// value no node computes).
std::vector<std::shared_ptr<const HostTensor>> evaluate_all(const Graph& graph, const std::vector<HostTensor>& inputs,
                                                             const EvaluateOptions& options = {});

}  // namespace ember::exporter
