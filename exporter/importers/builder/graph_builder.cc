#include "exporter/importers/builder/graph_builder.h"

#include <cmath>
#include <cstring>

#include "runtime/kernel/op_info.h"

namespace ember::exporter {
namespace {

bool is_optional_input(OpCode op, size_t index) {
  switch (op) {
    case OpCode::Linear:
    case OpCode::Conv2d: return index == 2;
    case OpCode::LayerNorm: return index == 1 || index == 2;
    default: return false;
  }
}

}  // namespace

GraphBuilder::GraphBuilder(uint64_t seed) : rng_(seed) {}

void GraphBuilder::symbol(const std::string& name, int64_t min, int64_t max) {
  if (name.empty()) throw ExportError("symbol(): empty name");
  if (graph_.find_symbol(name) != 0) throw ExportError("symbol '" + name + "' declared twice");
  if (min < 0 || min > max) {
    throw ExportError("symbol '" + name + "': bounds [" + std::to_string(min) + ", " + std::to_string(max) +
                      "] need 0 <= min <= max");
  }
  if (inference_) throw ExportError("symbol '" + name + "' declared after the first op: declare symbols first");
  graph_.symbols.push_back(Symbol{name, min, max, false});
}

std::string GraphBuilder::unique_value_name(const std::string& base) const {
  if (graph_.find_value(base) < 0) return base;
  for (int i = 1;; ++i) {
    std::string candidate = base + "." + std::to_string(i);
    if (graph_.find_value(candidate) < 0) return candidate;
  }
}

void GraphBuilder::check_value(ValueId v, const char* what) const {
  if (v < 0 || static_cast<size_t>(v) >= graph_.values.size()) {
    throw ExportError(std::string(what) + ": value id " + std::to_string(v) + " is not a value of this builder");
  }
}

void GraphBuilder::ensure_inference() {
  if (inference_) return;
  inference_ = std::make_unique<ShapeInference>(graph_);
  for (size_t v = 0; v < graph_.values.size(); ++v) inference_->add_source(static_cast<int>(v));
}

Value GraphBuilder::source_value(const char* what, const std::string& name, ScalarType dtype,
                                 const std::vector<DimSpec>& dims) const {
  const std::string label = std::string(what) + " '" + name + "'";
  if (name.empty()) throw ExportError(std::string(what) + "(): empty name");
  if (graph_.find_value(name) >= 0) throw ExportError(label + ": a value of that name exists");
  if (!is_valid(dtype)) throw ExportError(label + ": invalid dtype");
  if (dims.size() > static_cast<size_t>(kMaxRank)) throw ExportError(label + ": rank > 8");
  Value v;
  v.name = name;
  v.dtype = dtype;
  for (const DimSpec& d : dims) {
    if (d.is_symbolic()) {
      const int sym = graph_.find_symbol(d.symbol());
      if (sym == 0) {
        throw ExportError(label + ": symbol '" + d.symbol() + "' is not declared (call symbol() first)");
      }
      v.dims.push_back(Dim{graph_.symbols[static_cast<size_t>(sym) - 1].max, static_cast<uint16_t>(sym)});
    } else {
      if (d.size() < 0) throw ExportError(label + ": negative dim " + std::to_string(d.size()));
      v.dims.push_back(Dim{d.size(), 0});
    }
  }
  if (is_sub_byte(dtype) && (v.dims.empty() || v.dims.back().max % 2 != 0 || v.dims.back().sym != 0)) {
    throw ExportError(label + ": sub-byte dtype " + to_string(dtype) + " needs an even static innermost dim");
  }
  return v;
}

ValueId GraphBuilder::input(const std::string& name, ScalarType dtype, std::vector<DimSpec> dims) {
  const ValueId id = graph_.add_value(source_value("input", name, dtype, dims));
  graph_.inputs.push_back(NamedValue{name, id});
  if (inference_) inference_->add_source(id);
  return id;
}

ValueId GraphBuilder::state(const std::string& name, ScalarType dtype, std::vector<DimSpec> dims) {
  Value v = source_value("state", name, dtype, dims);
  v.state = name;
  const ValueId id = graph_.add_value(std::move(v));
  if (inference_) inference_->add_source(id);
  return id;
}

void GraphBuilder::output(const std::string& name, ValueId value) {
  check_value(value, "output()");
  const Value& v = graph_.values[static_cast<size_t>(value)];
  if (name.empty()) throw ExportError("output(): empty name");
  if (graph_.is_input(value)) throw ExportError("output '" + name + "': value '" + v.name + "' is a graph input");
  if (v.is_constant()) throw ExportError("output '" + name + "': value '" + v.name + "' is a constant");
  if (graph_.is_output(value)) throw ExportError("output '" + name + "': value '" + v.name + "' is already an output");
  for (const auto& list : {graph_.inputs, graph_.outputs}) {
    for (const NamedValue& nv : list) {
      if (nv.name == name) throw ExportError("output '" + name + "': the name is already used by an input or output");
    }
  }
  graph_.outputs.push_back(NamedValue{name, value});
}

ValueId GraphBuilder::constant(const std::string& name, ScalarType dtype, std::vector<int64_t> dims,
                               std::vector<uint8_t> bytes) {
  return constant_shared(name, dtype, std::move(dims), std::make_shared<const std::vector<uint8_t>>(std::move(bytes)));
}

ValueId GraphBuilder::constant_shared(const std::string& name, ScalarType dtype, std::vector<int64_t> dims,
                                      ConstantBytes bytes) {
  if (bytes == nullptr) throw ExportError("constant '" + name + "': no bytes");
  if (!is_valid(dtype)) throw ExportError("constant '" + name + "': invalid dtype");
  Value v;
  v.name = unique_value_name(name.empty() ? "const" : name);
  v.dtype = dtype;
  for (int64_t d : dims) {
    if (d < 0) throw ExportError("constant '" + name + "': negative dim");
    v.dims.push_back(Dim{d, 0});
  }
  if (v.dims.size() > static_cast<size_t>(kMaxRank)) throw ExportError("constant '" + name + "': rank > 8");
  if (bytes->size() != nbytes_max(v)) {
    throw ExportError("constant '" + name + "': " + std::to_string(bytes->size()) + " bytes given, " +
                      to_string(dtype) + format_dims(graph_, v.dims) + " needs " + std::to_string(nbytes_max(v)));
  }
  v.data = std::move(bytes);
  const ValueId id = graph_.add_value(std::move(v));
  if (inference_) inference_->add_source(id);
  return id;
}

ValueId GraphBuilder::constant_quantized(const std::string& name, ScalarType dtype, std::vector<int64_t> dims,
                                         std::vector<uint8_t> bytes, std::shared_ptr<const QuantParams> quant) {
  const ValueId id = constant(name, dtype, std::move(dims), std::move(bytes));
  graph_.values[static_cast<size_t>(id)].quant = std::move(quant);
  return id;
}

ValueId GraphBuilder::constant_f32(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& data) {
  std::vector<uint8_t> bytes(data.size() * sizeof(float));
  if (!data.empty()) std::memcpy(bytes.data(), data.data(), bytes.size());
  return constant(name, ScalarType::F32, std::move(dims), std::move(bytes));
}

ValueId GraphBuilder::random_uniform(const std::string& name, std::vector<int64_t> dims, float lo, float hi) {
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d < 0 ? 0 : d);
  std::vector<float> data(n);
  // The top 24 bits of the engine: the same numbers on every platform (std distributions are not).
  for (float& x : data) x = lo + (hi - lo) * static_cast<float>(rng_() >> 40) * (1.0f / 16777216.0f);
  return constant_f32(name, std::move(dims), data);
}

ValueId GraphBuilder::random_normal(const std::string& name, std::vector<int64_t> dims, float mean, float stddev) {
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d < 0 ? 0 : d);
  std::vector<float> data(n);
  for (float& x : data) {  // Box-Muller, one sample per pair
    const double u1 = (static_cast<double>(rng_() >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    const double u2 = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);
    x = mean + stddev * static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  return constant_f32(name, std::move(dims), data);
}

ValueId GraphBuilder::op(OpCode code, std::vector<ValueId> inputs, OpAttrs attrs, const std::string& name) {
  const OpInfo* info = find_op_info(code);
  if (info == nullptr) throw ExportError("unknown op code " + std::to_string(static_cast<int>(code)));
  const std::string node_name = name.empty() ? std::string(info->name) + "_" + std::to_string(graph_.nodes.size()) : name;
  for (const Node& n : graph_.nodes) {
    if (n.name == node_name) throw ExportError(std::string(info->name) + ": node name '" + node_name + "' is already used");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == kNoValue) {
      if (!is_optional_input(code, i)) {
        throw ExportError(std::string(info->name) + " '" + node_name + "': input " + std::to_string(i) +
                          " is required but absent");
      }
      continue;
    }
    check_value(inputs[i], (std::string(info->name) + " '" + node_name + "'").c_str());
  }
  // A trailing absent optional input is still passed (-1), so positions stay fixed.
  attrs.kind = info->attr_kind;
  ensure_inference();

  Node node;
  node.op = code;
  node.attrs = attrs;
  node.inputs = std::move(inputs);
  node.name = node_name;
  node.source_op = info->name;
  const int node_index = static_cast<int>(graph_.nodes.size());
  const size_t values_before = graph_.values.size();
  for (uint8_t o = 0; o < info->outputs; ++o) {
    Value out;
    out.name = unique_value_name(info->outputs == 1 ? node_name : node_name + ":" + std::to_string(o));
    out.producer = node_index;
    node.outputs.push_back(graph_.add_value(std::move(out)));
  }
  graph_.nodes.push_back(std::move(node));
  try {
    inference_->infer_node(node_index);
  } catch (...) {
    graph_.nodes.pop_back();
    graph_.values.resize(values_before);
    throw;
  }
  return graph_.nodes.back().outputs.front();
}

namespace {
OpAttrs no_attrs() { return OpAttrs{}; }
}  // namespace

ValueId GraphBuilder::add(ValueId a, ValueId b, const std::string& n) { return op(OpCode::Add, {a, b}, no_attrs(), n); }
ValueId GraphBuilder::sub(ValueId a, ValueId b, const std::string& n) { return op(OpCode::Sub, {a, b}, no_attrs(), n); }
ValueId GraphBuilder::mul(ValueId a, ValueId b, const std::string& n) { return op(OpCode::Mul, {a, b}, no_attrs(), n); }
ValueId GraphBuilder::div(ValueId a, ValueId b, const std::string& n) { return op(OpCode::Div, {a, b}, no_attrs(), n); }
ValueId GraphBuilder::relu(ValueId x, const std::string& n) { return op(OpCode::Relu, {x}, no_attrs(), n); }
ValueId GraphBuilder::silu(ValueId x, const std::string& n) { return op(OpCode::Silu, {x}, no_attrs(), n); }
ValueId GraphBuilder::sigmoid(ValueId x, const std::string& n) { return op(OpCode::Sigmoid, {x}, no_attrs(), n); }
ValueId GraphBuilder::tanh(ValueId x, const std::string& n) { return op(OpCode::Tanh, {x}, no_attrs(), n); }
ValueId GraphBuilder::matmul(ValueId a, ValueId b, const std::string& n) { return op(OpCode::MatMul, {a, b}, no_attrs(), n); }
ValueId GraphBuilder::global_avg_pool2d(ValueId x, const std::string& n) {
  return op(OpCode::GlobalAvgPool2d, {x}, no_attrs(), n);
}

ValueId GraphBuilder::gelu(ValueId x, GeluApprox approximate, const std::string& n) {
  OpAttrs a;
  a.gelu_approx = approximate;
  return op(OpCode::Gelu, {x}, a, n);
}

ValueId GraphBuilder::linear(ValueId x, ValueId w, ValueId b, const std::string& n) {
  OpAttrs a;
  a.activation_quant = ActivationQuant::None;
  return op(OpCode::Linear, {x, w, b}, a, n);
}

ValueId GraphBuilder::conv2d(ValueId x, ValueId w, ValueId b, const Conv2dParams& p, const std::string& n) {
  OpAttrs a;
  std::memcpy(a.stride, p.stride, sizeof(a.stride));
  std::memcpy(a.padding, p.padding, sizeof(a.padding));
  std::memcpy(a.dilation, p.dilation, sizeof(a.dilation));
  a.groups = p.groups;
  return op(OpCode::Conv2d, {x, w, b}, a, n);
}

namespace {
OpAttrs pool_attrs(const Pool2dParams& p) {
  OpAttrs a;
  std::memcpy(a.kernel, p.kernel, sizeof(a.kernel));
  std::memcpy(a.stride, p.stride, sizeof(a.stride));
  std::memcpy(a.padding, p.padding, sizeof(a.padding));
  std::memcpy(a.dilation, p.dilation, sizeof(a.dilation));
  a.ceil_mode = p.ceil_mode;
  a.count_include_pad = p.count_include_pad;
  return a;
}
}  // namespace

ValueId GraphBuilder::max_pool2d(ValueId x, const Pool2dParams& p, const std::string& n) {
  return op(OpCode::MaxPool2d, {x}, pool_attrs(p), n);
}
ValueId GraphBuilder::avg_pool2d(ValueId x, const Pool2dParams& p, const std::string& n) {
  return op(OpCode::AvgPool2d, {x}, pool_attrs(p), n);
}

ValueId GraphBuilder::softmax(ValueId x, int axis, const std::string& n) {
  OpAttrs a;
  a.axis = axis;
  return op(OpCode::Softmax, {x}, a, n);
}

ValueId GraphBuilder::layer_norm(ValueId x, ValueId gamma, ValueId beta, int axis, float epsilon, const std::string& n) {
  OpAttrs a;
  a.axis = axis;
  a.epsilon = epsilon;
  return op(OpCode::LayerNorm, {x, gamma, beta}, a, n);
}

ValueId GraphBuilder::reshape(ValueId x, std::vector<DimSpec> dims, const std::string& n) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) throw ExportError("reshape '" + n + "': rank > 8");
  OpAttrs a;
  a.count = static_cast<uint8_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].is_symbolic()) {
      const int sym = graph_.find_symbol(dims[i].symbol());
      if (sym == 0) throw ExportError("reshape '" + n + "': unknown symbol '" + dims[i].symbol() + "'");
      a.shape[i] = graph_.symbols[static_cast<size_t>(sym) - 1].max;
      a.shape_sym[i] = static_cast<uint16_t>(sym);
    } else {
      a.shape[i] = dims[i].size();
    }
  }
  return op(OpCode::Reshape, {x}, a, n);
}

ValueId GraphBuilder::transpose(ValueId x, std::vector<int> perm, const std::string& n) {
  if (perm.size() > static_cast<size_t>(kMaxRank)) throw ExportError("transpose '" + n + "': rank > 8");
  OpAttrs a;
  a.count = static_cast<uint8_t>(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) a.perm[i] = perm[i];
  return op(OpCode::Transpose, {x}, a, n);
}

ValueId GraphBuilder::concat(std::vector<ValueId> inputs, int axis, const std::string& n) {
  OpAttrs a;
  a.axis = axis;
  return op(OpCode::Concat, std::move(inputs), a, n);
}

ValueId GraphBuilder::slice(ValueId x, std::vector<int> axes, std::vector<int64_t> starts, std::vector<int64_t> ends,
                            std::vector<int64_t> steps, const std::string& n) {
  if (steps.empty()) steps.assign(axes.size(), 1);
  if (axes.size() > static_cast<size_t>(kMaxRank) || starts.size() != axes.size() || ends.size() != axes.size() ||
      steps.size() != axes.size()) {
    throw ExportError("slice '" + n + "': axes/starts/ends/steps must have one entry per sliced axis (at most 8)");
  }
  OpAttrs a;
  a.count = static_cast<uint8_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    a.axes[i] = axes[i];
    a.starts[i] = starts[i];
    a.ends[i] = ends[i];
    a.steps[i] = steps[i];
  }
  return op(OpCode::Slice, {x}, a, n);
}

Graph GraphBuilder::build() {
  if (graph_.outputs.empty()) throw ExportError("build(): the graph has no outputs (call output())");
  graph_.check_structure();
  inference_.reset();
  Graph g = std::move(graph_);
  graph_ = Graph();
  return g;
}

}  // namespace ember::exporter
