// GraphBuilder: builds an exporter Graph from C++, one method per op, running shape/dtype inference
// as each node is added. Every problem throws ExportError naming the op, node, dtypes and dims.
//
//   GraphBuilder b;
//   b.symbol("batch", 1, 8);
//   ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 64});
//   ValueId w = b.random_uniform("fc.w", {128, 64}, -0.1f, 0.1f);
//   b.output("y", b.relu(b.linear(x, w)));
//   Graph g = b.build();
//
// Constants are f32 unless given bytes. Symbols are declared before the first op. Not thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "exporter/ir/graph.h"
#include "exporter/passes/shape_inference.h"

namespace ember::exporter {

using ValueId = int;
constexpr ValueId kNoValue = -1;  // an absent optional input (no bias, ...)

// A dimension as written by the caller: a static size or a declared symbol's name.
// For reshape targets, -1 (once) means "inferred".
class DimSpec {
 public:
  DimSpec(int64_t size) : size_(size) {}  // NOLINT: implicit, so {1, 64} reads naturally
  DimSpec(int size) : size_(size) {}      // NOLINT
  static DimSpec sym(std::string name) {
    DimSpec d(int64_t{0});
    d.symbol_ = std::move(name);
    return d;
  }
  bool is_symbolic() const { return !symbol_.empty(); }
  int64_t size() const { return size_; }
  const std::string& symbol() const { return symbol_; }

 private:
  int64_t size_ = 0;
  std::string symbol_;
};

struct Conv2dParams {
  int stride[2] = {1, 1};
  int padding[4] = {0, 0, 0, 0};  // top, left, bottom, right
  int dilation[2] = {1, 1};
  int groups = 1;
  static Conv2dParams same3x3(int groups = 1) {  // stride 1, pad 1
    Conv2dParams p;
    p.padding[0] = p.padding[1] = p.padding[2] = p.padding[3] = 1;
    p.groups = groups;
    return p;
  }
};

struct Pool2dParams {
  int kernel[2] = {2, 2};
  int stride[2] = {2, 2};
  int padding[4] = {0, 0, 0, 0};
  int dilation[2] = {1, 1};
  bool ceil_mode = false;
  bool count_include_pad = false;
  static Pool2dParams square(int k, int s) {
    Pool2dParams p;
    p.kernel[0] = p.kernel[1] = k;
    p.stride[0] = p.stride[1] = s;
    return p;
  }
};

class GraphBuilder {
 public:
  explicit GraphBuilder(uint64_t seed = 1);

  // Declares a run-time size with 0 <= min <= max; before the first op.
  void symbol(const std::string& name, int64_t min, int64_t max);
  ValueId input(const std::string& name, ScalarType dtype, std::vector<DimSpec> dims);
  // Program state named `name` (docs/DESIGN.md §2: a KV cache), read and written in place by the ops that
  // declare it (OpInfo::state_inputs); symbolic dims take their load-time values.
  ValueId state(const std::string& name, ScalarType dtype, std::vector<DimSpec> dims);
  // Marks `value` as a graph output named `name` (not an input, a constant or already an output).
  void output(const std::string& name, ValueId value);

  // `bytes` must hold exactly dtype x dims bytes.
  ValueId constant(const std::string& name, ScalarType dtype, std::vector<int64_t> dims,
                   std::vector<uint8_t> bytes);
  ValueId constant_f32(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& data);
  // A constant sharing another's bytes (e.g. a tied LM head and its embedding table): the serializer
  // stores shared bytes once.
  ValueId constant_shared(const std::string& name, ScalarType dtype, std::vector<int64_t> dims, ConstantBytes bytes);
  // A quantized constant (graph.h QuantParams): `bytes` holds the codes of dtype x dims.
  ValueId constant_quantized(const std::string& name, ScalarType dtype, std::vector<int64_t> dims,
                             std::vector<uint8_t> bytes, std::shared_ptr<const QuantParams> quant);
  // Seeded (the builder's seed, then the order of calls) f32 constants.
  ValueId random_uniform(const std::string& name, std::vector<int64_t> dims, float lo, float hi);
  ValueId random_normal(const std::string& name, std::vector<int64_t> dims, float mean, float stddev);

  // Ops. `name` is the node name ("" = "<op>_<n>"); the output value is named after the node.
  ValueId add(ValueId a, ValueId b, const std::string& name = "");
  ValueId sub(ValueId a, ValueId b, const std::string& name = "");
  ValueId mul(ValueId a, ValueId b, const std::string& name = "");
  ValueId div(ValueId a, ValueId b, const std::string& name = "");
  ValueId relu(ValueId x, const std::string& name = "");
  ValueId gelu(ValueId x, GeluApprox approximate = GeluApprox::None, const std::string& name = "");
  ValueId silu(ValueId x, const std::string& name = "");
  ValueId sigmoid(ValueId x, const std::string& name = "");
  ValueId tanh(ValueId x, const std::string& name = "");
  ValueId matmul(ValueId a, ValueId b, const std::string& name = "");
  ValueId linear(ValueId x, ValueId w, ValueId b = kNoValue, const std::string& name = "");
  ValueId conv2d(ValueId x, ValueId w, ValueId b, const Conv2dParams& params, const std::string& name = "");
  ValueId max_pool2d(ValueId x, const Pool2dParams& params, const std::string& name = "");
  ValueId avg_pool2d(ValueId x, const Pool2dParams& params, const std::string& name = "");
  ValueId global_avg_pool2d(ValueId x, const std::string& name = "");
  ValueId softmax(ValueId x, int axis = -1, const std::string& name = "");
  ValueId layer_norm(ValueId x, ValueId gamma, ValueId beta, int axis = -1, float epsilon = 1e-5f,
                     const std::string& name = "");
  // Target dims: static sizes, declared or derived symbols by name, or -1 once.
  ValueId reshape(ValueId x, std::vector<DimSpec> dims, const std::string& name = "");
  ValueId transpose(ValueId x, std::vector<int> perm, const std::string& name = "");
  ValueId concat(std::vector<ValueId> inputs, int axis, const std::string& name = "");
  ValueId slice(ValueId x, std::vector<int> axes, std::vector<int64_t> starts, std::vector<int64_t> ends,
                std::vector<int64_t> steps = {}, const std::string& name = "");

  // Generic form: any op with explicit attributes (attrs.kind is set from the op).
  ValueId op(OpCode op, std::vector<ValueId> inputs, OpAttrs attrs, const std::string& name = "");

  const Graph& graph() const { return graph_; }
  // Checks that there is at least one output and returns the graph; the builder is left empty.
  Graph build();

 private:
  void check_value(ValueId v, const char* what) const;
  Value source_value(const char* what, const std::string& name, ScalarType dtype,
                     const std::vector<DimSpec>& dims) const;
  void ensure_inference();
  std::string unique_value_name(const std::string& base) const;

  Graph graph_;
  std::unique_ptr<ShapeInference> inference_;
  std::mt19937_64 rng_;
};

}  // namespace ember::exporter
