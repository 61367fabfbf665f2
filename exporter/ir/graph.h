// The exporter's IR: a graph of tensor values and op nodes, in topological order (a node's inputs
// are graph inputs, constants or outputs of earlier nodes). Host-only; errors are ExportError.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/core/quant.h"
#include "runtime/core/scalar_type.h"
#include "runtime/kernel/op.h"

namespace ember::exporter {

// Every failure inside the exporter: a message naming the op, node, dtypes and dims involved.
// Caught once at the CLI's main.
class ExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One dimension, as in the schema: `sym` 0 = static (size == max), otherwise the 1-based index of a
// Graph symbol whose value is the size at run time; `max` is then that symbol's max.
struct Dim {
  int64_t max = 0;
  uint16_t sym = 0;
  bool operator==(const Dim& other) const { return max == other.max && sym == other.sym; }
};

// A named run-time size (batch, seq_len, ...). `derived` symbols were created by shape inference
// for a dim that varies with the declared ones but equals none of them.
struct Symbol {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  bool derived = false;
};

using ConstantBytes = std::shared_ptr<const std::vector<uint8_t>>;

// A quantized constant (docs/DESIGN.md §4; runtime/core/quant.h): the value's `data` holds the codes, and
// its scales travel with it. The serializer writes the scale (and the global scale) as constants of
// their own, referenced by the file's QuantInfo, so no pass has to keep value ids of scales in step.
struct QuantParams {
  ScalarType scale_dtype = ScalarType::Invalid;
  std::vector<int64_t> block;       // per dim of the value
  std::vector<int64_t> scale_dims;  // [ceil(n / block[0]), ceil(k / block[1])]
  ConstantBytes scale;              // row-major: f32, e8m0 or ue4m3
  bool has_global_scale = false;    // NVFP4's f32 decode multiplier
  float global_scale = 1.0f;
};

struct Value {
  std::string name;
  ScalarType dtype = ScalarType::Invalid;
  std::vector<Dim> dims;
  ConstantBytes data;  // set for constants (exactly nbytes_max() bytes); shared, never copied
  int producer = -1;   // index of the node that writes it; -1 for graph inputs and constants
  std::shared_ptr<const QuantParams> quant;  // set only for quantized constants
  // Non-empty: program state (docs/DESIGN.md §2) bound by this name, e.g. a layer's KV cache. It has no
  // producer and no planned storage; the runtime allocates it once per Program with its symbolic
  // dims (num_blocks) at their load-time values; ops named by OpInfo::state_inputs write it.
  std::string state;

  bool is_constant() const { return data != nullptr; }
  bool is_state() const { return !state.empty(); }
};

struct Node {
  OpCode op = OpCode::Invalid;
  OpAttrs attrs;
  std::vector<int> inputs;   // value ids; -1 = absent optional input
  std::vector<int> outputs;  // value ids
  std::string name;
  std::string source_op;     // what the importer saw ("linear", "onnx::Gemm", ...); debug only
};

struct NamedValue {
  std::string name;
  int value = -1;
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<NamedValue> inputs;
  std::vector<NamedValue> outputs;
  std::vector<Symbol> symbols;  // Dim::sym indexes this, 1-based

  int add_value(Value value);
  // -1 when absent.
  int find_value(const std::string& name) const;
  int find_symbol(const std::string& name) const;  // 1-based id, 0 when absent
  bool is_input(int value) const;
  bool is_output(int value) const;
  // users[v] = indices of the nodes reading value v (once per node).
  std::vector<std::vector<int>> users() const;
  // Throws ExportError when ids are out of range, a node reads a value before it is written, a
  // value is written twice, or IO is malformed. Used after every pass in debug flows and by tests.
  void check_structure() const;
};

// Elements and bytes at the upper-bound shape (every dim at its max).
uint64_t numel_max(const std::vector<Dim>& dims);
// The runtime's layout class of a quantized constant (runtime/core/quant.h); None if unquantized.
QuantLayout quant_layout(const Value& value);
uint64_t nbytes_max(const Value& value);
// "[batch, 64]" (symbols by name).
std::string format_dims(const Graph& graph, const std::vector<Dim>& dims);
// "x: f32[batch, 64]"; "-" for id -1.
std::string format_value(const Graph& graph, int value);
// "linear 'fc1' (x: f32[batch, 64], w: f32[128, 64], b: -)".
std::string format_node(const Graph& graph, int node);
// Dtype names as in to_string(ScalarType) ("f32"); parse_dtype throws on an unknown name.
ScalarType parse_dtype(const std::string& name);
// Op names as in to_string(OpCode) ("conv2d"); parse_op throws on an unknown name.
OpCode parse_op(const std::string& name);

}  // namespace ember::exporter
