#include "exporter/importers/onnx/onnx_importer.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>

#include "exporter/importers/onnx/importer_internal.h"
#include "exporter/importers/onnx/model_proto.h"
#include "exporter/passes/batch_norm_folding.h"
#include "exporter/passes/constant_folding.h"
#include "exporter/passes/evaluate.h"
#include "exporter/passes/weight_check.h"
#include "runtime/kernel/kernel.h"
#include "tools/common/host_io.h"

namespace ember::exporter {
namespace onnx_detail {

// ---- Setup -------------------------------------------------------------------------------------

void Importer::read_opsets() {
  for (const auto& op : model_.opset_import()) {
    const std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    opsets_[domain] = op.version();
  }
  auto it = opsets_.find("");
  if (it == opsets_.end()) {
    if (model_.opset_import_size() == 0 && model_.ir_version() < 3) {
      opsets_[""] = 1;  // IR < 3 had no opset_import: opset 1
    } else {
      throw ExportError("onnx: the model imports no default-domain opset (opset_import has no '' / 'ai.onnx' entry)");
    }
  }
  stats_.opset = opsets_[""];
  if (stats_.opset < kMinOpset || stats_.opset > kMaxOpset) {
    throw ExportError("onnx: default-domain opset " + std::to_string(stats_.opset) + " is not supported (Ember imports " +
                      std::to_string(kMinOpset) + ".." + std::to_string(kMaxOpset) +
                      "; re-export with torch.onnx.export(..., opset_version=17))");
  }
}

void Importer::flatten_nodes() {
  for (const auto& f : model_.functions()) functions_[{f.domain(), f.name()}] = &f;
  for (const auto& node : model_.graph().node()) inline_node(node, 0, "", 0, nodes_);
}

void Importer::inline_node(const onnx::NodeProto& node, int64_t opset, const std::string&, int depth,
                           std::vector<FlatNode>& out) {
  const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  auto fn = functions_.find({node.domain(), node.op_type()});
  if (fn == functions_.end() && domain.empty()) {
    FlatNode flat;
    flat.proto = node;
    flat.opset = opset > 0 ? opset : opsets_.at("");
    out.push_back(std::move(flat));
    return;
  }
  if (fn == functions_.end()) {
    FlatNode flat;  // converted later into the "domain not supported" error, with its name
    flat.proto = node;
    auto op = opsets_.find(domain);
    flat.opset = op == opsets_.end() ? 0 : op->second;
    out.push_back(std::move(flat));
    return;
  }
  const onnx::FunctionProto& f = *fn->second;
  const std::string where = "onnx: function " + (f.domain().empty() ? "" : f.domain() + ".") + f.name() +
                            " called by node '" + node.name() + "'";
  if (depth >= kMaxFunctionDepth) throw ExportError(where + ": functions nest deeper than " + std::to_string(kMaxFunctionDepth));
  ++stats_.inlined_functions;
  // The function's own default-domain opset may differ from the model's.
  int64_t fn_opset = opsets_.at("");
  for (const auto& op : f.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") fn_opset = op.version();
  }
  if (fn_opset < kMinOpset || fn_opset > kMaxOpset) {
    throw ExportError(where + ": imports default-domain opset " + std::to_string(fn_opset) + " (supported " +
                      std::to_string(kMinOpset) + ".." + std::to_string(kMaxOpset) + ")");
  }
  // Formal -> actual names; internal values get a unique prefix.
  const std::string prefix = (node.name().empty() ? node.op_type() : node.name()) + "/" +
                             std::to_string(out.size()) + "/";
  std::map<std::string, std::string> rename;
  for (int i = 0; i < f.input_size(); ++i) rename[f.input(i)] = i < node.input_size() ? node.input(i) : "";
  for (int i = 0; i < f.output_size(); ++i) rename[f.output(i)] = i < node.output_size() ? node.output(i) : "";
  auto map_name = [&](const std::string& n) -> std::string {
    if (n.empty()) return n;
    auto it = rename.find(n);
    return it != rename.end() ? it->second : prefix + n;
  };
  for (int k = 0; k < f.node_size(); ++k) {
    const onnx::NodeProto& inner = f.node(k);
    // Functions calling functions multiply: bound what inlining may copy (nodes and their bytes).
    inlined_bytes_ += inner.ByteSizeLong();
    if (out.size() >= kMaxFlatNodes || inlined_bytes_ > kMaxInlinedBytes) {
      throw ExportError(where + ": inlining functions makes more than " + std::to_string(kMaxFlatNodes) + " nodes or " +
                        std::to_string(kMaxInlinedBytes >> 20) + " MiB of node protos");
    }
    onnx::NodeProto copy = inner;
    for (int i = 0; i < copy.input_size(); ++i) copy.set_input(i, map_name(inner.input(i)));
    for (int i = 0; i < copy.output_size(); ++i) copy.set_output(i, map_name(inner.output(i)));
    copy.set_name(prefix + (inner.name().empty() ? inner.op_type() + std::to_string(k) : inner.name()));
    // Attribute references take the caller's value.
    copy.clear_attribute();
    for (const auto& a : inner.attribute()) {
      if (a.ref_attr_name().empty()) {
        *copy.add_attribute() = a;
        continue;
      }
      const onnx::AttributeProto* actual = nullptr;
      for (const auto& ca : node.attribute()) {
        if (ca.name() == a.ref_attr_name()) actual = &ca;
      }
      if (actual == nullptr) {
        throw ExportError(where + ": attribute '" + a.ref_attr_name() +
                          "' is not given by the caller (function attribute defaults are not supported)");
      }
      onnx::AttributeProto* added = copy.add_attribute();
      *added = *actual;
      added->set_name(a.name());
    }
    const std::string inner_domain = copy.domain() == "ai.onnx" ? "" : copy.domain();
    if (inner_domain.empty() && !functions_.count({copy.domain(), copy.op_type()})) {
      FlatNode flat;
      flat.proto = std::move(copy);
      flat.opset = fn_opset;
      out.push_back(std::move(flat));
    } else {
      inline_node(copy, fn_opset, prefix, depth + 1, out);
    }
  }
}

void Importer::declare_inputs() {
  const onnx::GraphProto& g = model_.graph();
  std::set<std::string> initializer_names;
  for (const auto& init : g.initializer()) initializer_names.insert(init.name());
  std::vector<const onnx::ValueInfoProto*> inputs;
  for (const auto& in : g.input()) {
    if (!initializer_names.count(in.name())) inputs.push_back(&in);
  }
  for (const auto& iv : options_.input_values) {
    auto it = std::find_if(inputs.begin(), inputs.end(), [&](const auto* in) { return in->name() == iv.name; });
    if (it == inputs.end()) {
      std::string names;
      for (const auto* in : inputs) names += (names.empty() ? "" : ", ") + in->name();
      throw ExportError("--input-value names input '" + iv.name + "', but the model's inputs are: " +
                        (names.empty() ? "(none)" : names));
    }
    bind_input_value(**it, iv);
    inputs.erase(it);
  }
  for (const InputShapeSpec& spec : options_.input_shapes) {
    const bool found = std::any_of(inputs.begin(), inputs.end(), [&](const auto* in) { return in->name() == spec.name; });
    if (!found) {
      std::string names;
      for (const auto* in : inputs) names += (names.empty() ? "" : ", ") + in->name();
      throw ExportError("--input-shape names input '" + spec.name + "', but the model's inputs are: " +
                        (names.empty() ? "(none)" : names));
    }
  }
  // Symbols: bounds from the specs first (in order), then dim_param names map to them.
  std::map<std::string, std::pair<int64_t, int64_t>> bounds;
  for (const InputShapeSpec& spec : options_.input_shapes) {
    for (const InputDimSpec& d : spec.dims) {
      if (d.size >= 0 || d.min < 0) continue;
      auto it = bounds.find(d.symbol);
      if (it != bounds.end() && it->second != std::make_pair(d.min, d.max)) {
        throw ExportError("--input-shape: symbol '" + d.symbol + "' has bounds " + std::to_string(it->second.first) + ".." +
                          std::to_string(it->second.second) + " and " + std::to_string(d.min) + ".." + std::to_string(d.max));
      }
      bounds[d.symbol] = {d.min, d.max};
    }
  }
  auto symbol_id = [&](const std::string& name) -> uint16_t {
    int id = graph_.find_symbol(name);
    if (id == 0) {
      auto b = bounds.find(name);
      if (b == bounds.end()) throw ExportError("--input-shape: symbol '" + name + "' has no bounds (write " + name + ":MIN..MAX once)");
      graph_.symbols.push_back(Symbol{name, b->second.first, b->second.second, false});
      id = static_cast<int>(graph_.symbols.size());
    }
    return static_cast<uint16_t>(id);
  };
  // dim_param -> the dim an override gave it (a symbol or a static size).
  std::map<std::string, Dim> dim_params;
  for (const auto* in : inputs) {
    const InputShapeSpec* spec = nullptr;
    for (const InputShapeSpec& s : options_.input_shapes) {
      if (s.name == in->name()) spec = &s;
    }
    if (spec == nullptr || !in->type().has_tensor_type() || !in->type().tensor_type().has_shape()) continue;
    const auto& shape = in->type().tensor_type().shape();
    for (int i = 0; i < shape.dim_size() && i < static_cast<int>(spec->dims.size()); ++i) {
      if (!shape.dim(i).has_dim_param() || shape.dim(i).dim_param().empty()) continue;
      const InputDimSpec& d = spec->dims[static_cast<size_t>(i)];
      dim_params[shape.dim(i).dim_param()] = d.size >= 0 ? Dim{d.size, 0} : Dim{0, symbol_id(d.symbol)};
    }
  }
  for (const auto* in : inputs) {
    const std::string what = "onnx: graph input '" + in->name() + "'";
    if (!in->type().has_tensor_type()) throw ExportError(what + ": only tensor inputs are supported (not sequences, maps or optionals)");
    const auto& tt = in->type().tensor_type();
    ScalarType dtype = map_onnx_dtype(tt.elem_type(), what);
    if (dtype == ScalarType::F64) throw ExportError(what + ": ONNX data type DOUBLE is not supported for run-time tensors");
    const InputShapeSpec* spec = nullptr;
    for (const InputShapeSpec& s : options_.input_shapes) {
      if (s.name == in->name()) spec = &s;
    }
    Value v;
    v.name = in->name();
    v.dtype = dtype;
    const bool has_shape = tt.has_shape();
    const int onnx_rank = has_shape ? tt.shape().dim_size() : -1;
    if (spec != nullptr) {
      if (onnx_rank >= 0 && onnx_rank != static_cast<int>(spec->dims.size())) {
        throw ExportError("--input-shape '" + spec->text + "': rank " + std::to_string(spec->dims.size()) +
                          ", but the model declares rank " + std::to_string(onnx_rank) + " for '" + in->name() + "'");
      }
      for (size_t i = 0; i < spec->dims.size(); ++i) {
        const InputDimSpec& d = spec->dims[i];
        if (onnx_rank >= 0) {
          const auto& od = tt.shape().dim(static_cast<int>(i));
          // A negative dim_value (some exporters write -1) is an unknown dim: the spec bounds it.
          if (od.has_dim_value() && od.dim_value() >= 0 && (d.size < 0 || d.size != od.dim_value())) {
            throw ExportError("--input-shape '" + spec->text + "': dim " + std::to_string(i) + " is " +
                              (d.size >= 0 ? std::to_string(d.size) : "symbol '" + d.symbol + "'") +
                              ", but the model fixes it to " + std::to_string(od.dim_value()));
          }
        }
        if (d.size >= 0) {
          v.dims.push_back(Dim{d.size, 0});
        } else {
          const uint16_t sym = symbol_id(d.symbol);
          v.dims.push_back(Dim{graph_.symbols[sym - 1u].max, sym});
        }
      }
    } else {
      if (!has_shape) {
        throw ExportError(what + ": the model gives no shape; pass --input-shape " + in->name() + "=DIMS");
      }
      for (int i = 0; i < onnx_rank; ++i) {
        const auto& od = tt.shape().dim(i);
        if (od.has_dim_value() && od.dim_value() >= 0) {
          v.dims.push_back(Dim{od.dim_value(), 0});
          continue;
        }
        const std::string param = od.has_dim_param() ? od.dim_param() : "";
        auto it = dim_params.find(param);
        if (!param.empty() && it != dim_params.end()) {
          const Dim& d = it->second;
          v.dims.push_back(d.sym ? Dim{graph_.symbols[d.sym - 1u].max, d.sym} : d);
          continue;
        }
        throw ExportError(what + ": dim " + std::to_string(i) + " is " +
                          (param.empty() ? std::string(od.has_dim_value() ? "unknown (dim_value " +
                                                                                std::to_string(od.dim_value()) + ")"
                                                                          : "unknown")
                                         : "symbolic ('" + param + "')") +
                          "; give its size or bounds, e.g. --input-shape " + in->name() + "=" +
                          (param.empty() ? std::string("batch") : param) + ":1..8x...");
      }
    }
    if (v.dims.size() > static_cast<size_t>(kMaxRank)) throw ExportError(what + ": rank > 8");
    value_names_.insert(v.name);
    const int id = graph_.add_value(std::move(v));
    graph_.inputs.push_back(NamedValue{in->name(), id});
    env_[in->name()] = std::make_shared<Entry>(Entry{id, nullptr, nullptr});
  }
  declared_symbols_ = graph_.symbols.size();
}

void Importer::read_initializers() {
  // Initializers read as learned parameters (weights, biases, norm scales): there an infinity is as
  // wrong as a NaN. Elsewhere a ±inf initializer is a legitimate fill value or bound (an attention
  // mask's -inf), and only NaN is refused (passes/weight_check.h says the same for the IR).
  static const std::set<std::string> kWeightOps = {
      "MatMul", "Gemm", "Conv", "ConvTranspose", "BatchNormalization", "LayerNormalization",
      "InstanceNormalization", "GroupNormalization", "SimplifiedLayerNormalization", "RMSNormalization",
      "Einsum", "LSTM", "GRU", "RNN"};
  std::set<std::string> weight_names;
  for (const auto& node : model_.graph().node()) {
    const bool weight_op = kWeightOps.count(node.op_type()) != 0;
    for (int i = 0; i < node.input_size(); ++i) {
      if ((weight_op && i > 0) || (node.op_type() == "Gather" && i == 0)) weight_names.insert(node.input(i));
    }
  }
  WeightCheck non_finite;  // as stored: import-time evaluation (transposes, folds) could hide a NaN
  for (const auto& init : model_.graph().initializer()) {
    const std::string what = "onnx: initializer '" + init.name() + "'";
    if (init.data_location() == onnx::TensorProto::EXTERNAL) ++stats_.external_tensors;
    auto t = std::make_shared<HostTensor>(read_tensor_proto(init, read_options_, what));
    stats_.initializer_bytes += t->bytes.size();
    uint64_t first = 0;
    const uint64_t numel = is_sub_byte(t->dtype) ? 0 : t->bytes.size() / std::max(1, bits_of(t->dtype) / 8);
    const bool include_inf = weight_names.count(init.name()) != 0;
    if (const uint64_t bad = count_non_finite(t->dtype, t->bytes.data(), numel, &first, include_inf); bad != 0) {
      std::string dims;
      for (int64_t d : t->dims) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      non_finite.tensors.push_back({init.name(), std::string(to_string(t->dtype)) + "[" + dims + "]", bad, numel, first,
                                    non_finite_text(t->dtype, t->bytes.data(), first)});
    }
    env_[init.name()] = std::make_shared<Entry>(Entry{-1, std::move(t), nullptr});
  }
  if (!non_finite.tensors.empty() && !options_.allow_non_finite_weights) {
    throw ExportError("onnx: non-finite weights in initializers: " + non_finite.format() +
                      " (pass --allow-non-finite-weights to export them anyway)");
  }
  if (model_.graph().sparse_initializer_size() > 0) {
    throw ExportError("onnx: sparse initializers are not supported ('" + model_.graph().sparse_initializer(0).values().name() + "')");
  }
}

// ---- Values ------------------------------------------------------------------------------------

std::string Importer::unique_value_name(const std::string& base) const {
  std::string name = base.empty() ? "v" : base;
  for (int i = 1; value_names_.count(name); ++i) name = base + "." + std::to_string(i);
  return name;
}

std::string Importer::unique_node_name(const std::string& base) {
  std::string name = base;
  for (int i = 1; node_names_.count(name); ++i) name = base + "." + std::to_string(i);
  node_names_.insert(name);
  return name;
}

std::string Importer::fmt(const std::vector<SymInt>& v) const {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + format_sym(v[i], graph_);
  return s + "]";
}

Entry& Importer::entry(const NodeContext& ctx, size_t i) {
  if (!ctx.has_input(i)) ctx.fail("input " + std::to_string(i) + " is required");
  auto it = env_.find(ctx.input(i));
  if (it == env_.end()) {
    ctx.fail("input '" + ctx.input(i) + "' is not a graph input, an initializer or an earlier node's output "
             "(the graph is not topologically sorted, or it reads an outer scope)");
  }
  return *it->second;
}

void Importer::define(const NodeContext& ctx, size_t output, Entry e) {
  if (!ctx.has_output(output)) return;
  const std::string& name = ctx.output(output);
  if (env_.count(name)) ctx.fail("output '" + name + "' is already defined (SSA violated)");
  env_[name] = std::make_shared<Entry>(std::move(e));
}

void Importer::define_constant(const NodeContext& ctx, size_t output, HostTensor t) {
  define(ctx, output, Entry{-1, std::make_shared<HostTensor>(std::move(t)), nullptr});
}

void Importer::define_known(const NodeContext& ctx, size_t output, Known k) {
  define(ctx, output, Entry{-1, nullptr, std::make_shared<Known>(std::move(k))});
}

void Importer::define_alias(NodeContext& ctx, size_t output, size_t input) {
  entry(ctx, input);  // checks that it exists
  if (!ctx.has_output(output)) return;
  if (env_.count(ctx.output(output))) ctx.fail("output '" + ctx.output(output) + "' is already defined (SSA violated)");
  env_[ctx.output(output)] = env_.at(ctx.input(input));
}

int Importer::add_constant(const std::string& name, HostTensor t) {
  Value v;
  v.name = unique_value_name(name);
  value_names_.insert(v.name);
  v.dtype = t.dtype;
  for (int64_t d : t.dims) v.dims.push_back(Dim{d, 0});
  v.data = std::make_shared<const std::vector<uint8_t>>(std::move(t.bytes));
  const int id = graph_.add_value(std::move(v));
  if (inference_) inference_->add_source(id);
  return id;
}

int Importer::materialize(Entry& e, const std::string& name) {
  if (e.value >= 0) return e.value;
  if (e.constant) {
    e.value = add_constant(name, *e.constant);
    return e.value;
  }
  if (e.known) {
    if (!e.known->all_constant()) {
      for (const SymInt& s : e.known->elems) {
        if (!s.is_constant()) {
          throw ExportError("'" + name + "' = " + fmt(e.known->elems) + " depends on " + format_sym(s, graph_) +
                            " at run time and is needed as a tensor; Ember folds shape values only into "
                            "reshape/expand/slice attributes");
        }
      }
    }
    e.value = add_constant(name, known_to_tensor(*e.known));
    return e.value;
  }
  throw ExportError("internal: empty entry '" + name + "'");
}

int Importer::value_of(const NodeContext& ctx, size_t i) {
  Entry& e = entry(ctx, i);
  try {
    return materialize(e, ctx.input(i));
  } catch (const ExportError& err) {
    ctx.fail(err.what());
  }
}

const HostTensor* Importer::constant_of(const NodeContext& ctx, size_t i) {
  Entry& e = entry(ctx, i);
  if (e.constant) return e.constant.get();
  if (e.known && e.known->all_constant()) {
    e.constant = std::make_shared<HostTensor>(known_to_tensor(*e.known));
    return e.constant.get();
  }
  if (e.value >= 0 && value(e.value).is_constant()) {
    auto t = std::make_shared<HostTensor>();
    const Value& v = value(e.value);
    t->dtype = v.dtype;
    for (const Dim& d : v.dims) t->dims.push_back(d.max);
    t->bytes = *v.data;
    e.constant = std::move(t);
    return e.constant.get();
  }
  return nullptr;
}

const Known* Importer::known_of(const NodeContext& ctx, size_t i) {
  Entry& e = entry(ctx, i);
  if (e.known) return e.known.get();
  const HostTensor* c = constant_of(ctx, i);
  if (c == nullptr || !is_integer_dtype(c->dtype) || c->numel() > kMaxKnownElements) return nullptr;
  auto k = std::make_shared<Known>();
  k->dtype = c->dtype;
  k->dims = c->dims;
  for (size_t j = 0; j < c->numel(); ++j) k->elems.push_back(SymInt::constant(read_int(*c, j)));
  e.known = k;
  return e.known.get();
}

std::vector<SymInt> Importer::dims_of(const NodeContext& ctx, size_t i) {
  Entry& e = entry(ctx, i);
  std::vector<SymInt> out;
  if (e.known) {
    for (int64_t d : e.known->dims) out.push_back(SymInt::constant(d));
  } else if (e.constant) {
    for (int64_t d : e.constant->dims) out.push_back(SymInt::constant(d));
  } else {
    for (const Dim& d : value(e.value).dims) out.push_back(dim_sym(d));
  }
  return out;
}

size_t Importer::rank_of(const NodeContext& ctx, size_t i) { return dims_of(ctx, i).size(); }

ScalarType Importer::dtype_of(const NodeContext& ctx, size_t i) {
  Entry& e = entry(ctx, i);
  if (e.known) return e.known->dtype;
  if (e.constant) return e.constant->dtype;
  return value(e.value).dtype;
}

double Importer::scalar_of(const NodeContext& ctx, size_t i, double def, const char* what) {
  if (!ctx.has_input(i)) return def;
  const HostTensor* c = constant_of(ctx, i);
  if (c == nullptr) ctx.fail(std::string(what) + " (input " + std::to_string(i) + " '" + ctx.input(i) + "') must be a constant");
  if (c->numel() != 1) ctx.fail(std::string(what) + " must be a scalar, got " + std::to_string(c->numel()) + " elements");
  return read_float(*c, 0);
}

std::vector<int64_t> Importer::ints_of(const NodeContext& ctx, size_t i, const char* what) {
  const Known* k = known_of(ctx, i);
  if (k == nullptr) {
    ctx.fail(std::string(what) + " (input '" + ctx.input(i) + "') must be an integer constant known at export");
  }
  std::vector<int64_t> out;
  for (const SymInt& s : k->elems) {
    if (!s.is_constant()) {
      ctx.fail(std::string(what) + " (input '" + ctx.input(i) + "') = " + fmt(k->elems) +
               " depends on run-time sizes; it must be constant");
    }
    out.push_back(s.c);
  }
  return out;
}

// ---- Emitting ----------------------------------------------------------------------------------

std::vector<int> Importer::emit(const NodeContext& ctx, OpCode op, std::vector<int> inputs, OpAttrs attrs,
                                const std::string& out_name, const std::string& suffix) {
  const OpInfo* info = find_op_info(op);
  if (info == nullptr) {
    ctx.fail(std::string("needs Ember op '") + to_string(op) + "' (op code " + std::to_string(static_cast<int>(op)) +
             "), which this build does not define yet");
  }
  attrs.kind = info->attr_kind;
  Node node;
  node.op = op;
  node.attrs = attrs;
  node.inputs = std::move(inputs);
  node.source_op = "onnx::" + ctx.op_type();
  const std::string base = ctx.name() + (suffix.empty() ? "" : "/" + suffix);

  // Inputs all constant: fold now with the reference kernels (so later nodes see constants), unless
  // the attributes name run-time symbols (the output shape is then not known at export).
  bool all_constant = !node.inputs.empty();
  for (int i = 0; i < kMaxRank; ++i) all_constant = all_constant && attrs.shape_sym[i] == 0 && attrs.ends_sym[i] == 0;
  std::vector<const HostTensor*> ins;
  std::vector<HostTensor> owned;
  owned.reserve(node.inputs.size());
  for (int in : node.inputs) {
    if (in < 0) {
      ins.push_back(nullptr);
      continue;
    }
    if (!value(in).is_constant()) {
      all_constant = false;
      break;
    }
    HostTensor t;
    t.dtype = value(in).dtype;
    for (const Dim& d : value(in).dims) t.dims.push_back(d.max);
    t.bytes = *value(in).data;
    owned.push_back(std::move(t));
    ins.push_back(&owned.back());
  }
  if (all_constant) {
    node.name = base;
    std::vector<HostTensor> outs;
    bool folded = true;
    try {
      outs = evaluate_node(node, ins, {});
    } catch (const InputValueError& e) {
      ctx.fail(e.what());  // an out-of-range index: every run would fail the same way
    } catch (const ExportError&) {
      folded = false;  // no reference kernel for these dtypes: keep the node (partitioning decides)
    }
    if (folded) {
      ++stats_.evaluated_at_export;
      std::vector<int> ids;
      for (size_t o = 0; o < outs.size(); ++o) {
        ids.push_back(add_constant(outs.size() == 1 ? out_name : out_name + ":" + std::to_string(o), std::move(outs[o])));
      }
      return ids;
    }
  }

  node.name = unique_node_name(base);
  const int index = static_cast<int>(graph_.nodes.size());
  for (uint8_t o = 0; o < info->outputs; ++o) {
    Value v;
    v.name = unique_value_name(info->outputs == 1 ? out_name : out_name + ":" + std::to_string(o));
    value_names_.insert(v.name);
    v.producer = index;
    node.outputs.push_back(graph_.add_value(std::move(v)));
  }
  graph_.nodes.push_back(std::move(node));
  inference_->infer_node(index);
  return graph_.nodes.back().outputs;
}

int Importer::emit_reshape(const NodeContext& ctx, int x, const std::vector<SymInt>& target, const std::string& out_name,
                           const std::string& suffix, bool allow_alias) {
  if (target.size() > static_cast<size_t>(kMaxRank)) ctx.fail("reshape to rank " + std::to_string(target.size()) + " > 8");
  OpAttrs a;
  a.count = static_cast<uint8_t>(target.size());
  int inferred = -1;
  std::vector<size_t> unknown;  // dims that must become the inferred one
  for (size_t i = 0; i < target.size(); ++i) {
    const SymInt& s = target[i];
    if (s.is_constant()) {
      if (s.c == -1) {
        if (inferred >= 0) ctx.fail("reshape target " + fmt(target) + " has -1 twice");
        inferred = static_cast<int>(i);
      } else if (s.c < 0) {
        ctx.fail("reshape target " + fmt(target) + " has a negative dim");
      }
      a.shape[i] = s.c;
    } else if (s.is_symbol() && s.symbol_id() <= declared_symbols_) {
      a.shape[i] = graph_.symbols[s.symbol_id() - 1u].max;
      a.shape_sym[i] = s.symbol_id();
    } else {
      unknown.push_back(i);
    }
  }
  if (!unknown.empty()) {
    if (unknown.size() > 1 || inferred >= 0) {
      ctx.fail("reshape target " + fmt(target) + " has more than one dim that is neither static, an input symbol "
               "nor -1; Ember can infer only one");
    }
    a.shape[unknown[0]] = -1;
  }
  if (allow_alias) {
    const std::vector<Dim>& in = value(x).dims;
    bool same = in.size() == target.size() && unknown.empty() && inferred < 0;
    for (size_t i = 0; same && i < in.size(); ++i) {
      same = in[i].sym == a.shape_sym[i] && (in[i].sym != 0 || in[i].max == a.shape[i]);
    }
    if (same) return x;
  }
  return emit1(ctx, OpCode::Reshape, {x}, a, out_name, suffix);
}

// ---- Driver ------------------------------------------------------------------------------------

const std::map<std::string, Importer::Handler>& Importer::handlers() {
  static const std::map<std::string, Handler> kHandlers = {
      {"Constant", &Importer::op_constant},
      {"Identity", &Importer::op_identity},
      {"Dropout", &Importer::op_dropout},
      {"Shape", &Importer::op_shape},
      {"Size", &Importer::op_size},
      {"Conv", &Importer::op_conv},
      {"Gemm", &Importer::op_gemm},
      {"MatMul", &Importer::op_matmul},
      {"Add", &Importer::op_binary},
      {"Sub", &Importer::op_binary},
      {"Mul", &Importer::op_binary},
      {"Div", &Importer::op_binary},
      {"Pow", &Importer::op_pow},
      {"Relu", &Importer::op_unary},
      {"Sigmoid", &Importer::op_unary},
      {"Tanh", &Importer::op_unary},
      {"Erf", &Importer::op_unary},
      {"Sqrt", &Importer::op_unary},
      {"Exp", &Importer::op_unary},
      {"Neg", &Importer::op_unary},
      {"HardSwish", &Importer::op_unary},
      {"Gelu", &Importer::op_gelu},
      {"Clip", &Importer::op_clip},
      {"HardSigmoid", &Importer::op_hard_sigmoid},
      {"Softmax", &Importer::op_softmax},
      {"MaxPool", &Importer::op_pool},
      {"AveragePool", &Importer::op_pool},
      {"GlobalAveragePool", &Importer::op_global_average_pool},
      {"BatchNormalization", &Importer::op_batch_norm},
      {"LayerNormalization", &Importer::op_layer_norm},
      {"Flatten", &Importer::op_flatten},
      {"Reshape", &Importer::op_reshape},
      {"Squeeze", &Importer::op_squeeze},
      {"Unsqueeze", &Importer::op_unsqueeze},
      {"Transpose", &Importer::op_transpose},
      {"Concat", &Importer::op_concat},
      {"Slice", &Importer::op_slice},
      {"Split", &Importer::op_split},
      {"Gather", &Importer::op_gather},
      {"Where", &Importer::op_where},
      {"Equal", &Importer::op_equal},
      {"Cast", &Importer::op_cast},
      {"Expand", &Importer::op_expand},
      {"Pad", &Importer::op_pad},
      {"ReduceMean", &Importer::op_reduce},
      {"ReduceSum", &Importer::op_reduce},
      {"ReduceL2", &Importer::op_reduce},
      {"ConstantOfShape", &Importer::op_constant_of_shape},
      {"Range", &Importer::op_range},
      {"ScatterND", &Importer::op_scatter_nd},
      {"Einsum", &Importer::op_einsum},
      {"Not", &Importer::op_not},
      {"If", &Importer::op_if},
      {"IsNaN", &Importer::op_isnan},
      {"LogSoftmax", &Importer::op_log_softmax},
      {"GatherND", &Importer::op_gather_nd},
      {"QuantizeLinear", &Importer::op_quantized},
      {"DequantizeLinear", &Importer::op_quantized},
      {"DynamicQuantizeLinear", &Importer::op_quantized},
      {"QLinearConv", &Importer::op_quantized},
      {"QLinearMatMul", &Importer::op_quantized},
      {"MatMulInteger", &Importer::op_quantized},
      {"ConvInteger", &Importer::op_quantized},
  // [issue 17: elementwise ops]
      {"LeakyRelu", &Importer::op_activation},
      {"Elu", &Importer::op_activation},
      {"Selu", &Importer::op_activation},
      {"PRelu", &Importer::op_prelu},
      {"Softplus", &Importer::op_math_unary},
      {"Log", &Importer::op_math_unary},
      {"Abs", &Importer::op_math_unary},
      {"Reciprocal", &Importer::op_math_unary},
      {"Floor", &Importer::op_math_unary},
      {"Ceil", &Importer::op_math_unary},
      {"Round", &Importer::op_math_unary},
      {"Sin", &Importer::op_math_unary},
      {"Cos", &Importer::op_math_unary},
      {"Greater", &Importer::op_compare},
      {"Less", &Importer::op_compare},
      {"GreaterOrEqual", &Importer::op_compare},
      {"LessOrEqual", &Importer::op_compare},
      {"And", &Importer::op_logical},
      {"Or", &Importer::op_logical},
      {"Xor", &Importer::op_logical},
      {"Max", &Importer::op_variadic},
      {"Min", &Importer::op_variadic},
      {"Sum", &Importer::op_variadic},
      {"Mean", &Importer::op_variadic},

  // [issue 17: reductions and index ops]
      {"ReduceMax", &Importer::op_reduce_extreme},
      {"ReduceMin", &Importer::op_reduce_extreme},
      {"ReduceProd", &Importer::op_reduce_extreme},
      {"ReduceLogSumExp", &Importer::op_reduce_composed},
      {"ReduceSumSquare", &Importer::op_reduce_composed},
      {"ReduceL1", &Importer::op_reduce_composed},
      {"ReduceLogSum", &Importer::op_reduce_composed},
      {"ArgMax", &Importer::op_arg},
      {"ArgMin", &Importer::op_arg},
      {"TopK", &Importer::op_topk},
      {"CumSum", &Importer::op_cumsum},
      {"GatherElements", &Importer::op_gather_elements},
      {"GroupNormalization", &Importer::op_group_norm},
      {"InstanceNormalization", &Importer::op_group_norm},
      {"Tile", &Importer::op_tile},
      {"DepthToSpace", &Importer::op_depth_space},
      {"SpaceToDepth", &Importer::op_depth_space},

  // [issue 17: resize, conv_transpose2d]
      {"Resize", &Importer::op_resize},
      {"ConvTranspose", &Importer::op_conv_transpose},

  // [issue 17: lstm, gru]
      {"LSTM", &Importer::op_rnn},
      {"GRU", &Importer::op_rnn},

  };
  return kHandlers;
}

void Importer::convert_node(const FlatNode& flat, size_t index) {
  const onnx::NodeProto& proto = flat.proto;
  const std::string name = proto.name().empty() ? proto.op_type() + "_" + std::to_string(index) : proto.name();
  NodeContext ctx(proto, name, flat.opset);
  ++stats_.onnx_ops[proto.op_type()];
  const std::string domain = proto.domain() == "ai.onnx" ? "" : proto.domain();
  try {
    if (!domain.empty()) {
      ctx.fail("op type '" + proto.op_type() + "' of domain '" + domain + "' is not supported (only the default ONNX domain)");
    }
    if (ctx.output_count() == 0) ctx.fail("the node has no outputs");
    // Integer shape arithmetic is evaluated at export whenever its inputs are known there (this
    // also covers ops with no run-time mapping, such as Mod, Less or ReduceProd on shape values).
    if (!try_known(ctx)) {
      const auto& table = handlers();
      auto it = table.find(proto.op_type());
      if (it == table.end()) ctx.fail("op type not supported by Ember's ONNX importer");
      (this->*(it->second))(ctx);
    }
    ctx.check_attributes_used();
    for (size_t o = 0; o < ctx.output_count(); ++o) {
      if (ctx.has_output(o) && !env_.count(ctx.output(o)) &&
          (use_count(ctx.output(o)) > 0 || is_graph_output(ctx.output(o)))) {
        ctx.fail("output " + std::to_string(o) + " ('" + ctx.output(o) + "') is not supported");
      }
    }
  } catch (const AlreadyReported&) {
    throw;
  } catch (const ExportError& e) {
    const std::string msg = e.what();
    if (msg.rfind("onnx: ", 0) == 0) throw;
    throw ExportError(ctx.where() + ": " + msg);
  }
}

void Importer::convert_or_record(const FlatNode& flat, size_t index) {
  const onnx::NodeProto& proto = flat.proto;
  const bool downstream = std::any_of(proto.input().begin(), proto.input().end(),
                                      [&](const std::string& in) { return poisoned_.count(in) != 0; });
  if (!downstream) {
    try {
      convert_node(flat, index);
      return;
    } catch (const AlreadyReported&) {
      ++skipped_nodes_;
    } catch (const ExportError& e) {
      failures_.push_back(Failure{proto.op_type(), e.what()});
    }
  } else {
    ++stats_.onnx_ops[proto.op_type()];
    // Not tried, but an op type the importer has no handler for is reported anyway, so that one
    // export lists every missing op type (not only the first on each path).
    const std::string domain = proto.domain() == "ai.onnx" ? "" : proto.domain();
    if (!domain.empty() || handlers().count(proto.op_type()) == 0) {
      const std::string name = proto.name().empty() ? proto.op_type() + "_" + std::to_string(index) : proto.name();
      const NodeContext ctx(proto, name, flat.opset);
      failures_.push_back(Failure{proto.op_type(), ctx.where() + ": " +
                                                       (domain.empty() ? "op type not supported by Ember's ONNX importer"
                                                                       : "op type '" + proto.op_type() + "' of domain '" +
                                                                             domain + "' is not supported (only the default ONNX domain)")});
    } else {
      ++skipped_nodes_;
    }
  }
  // Its outputs are unknown from here on: every reader is skipped (not reported: it may well be
  // supported) and the import fails at the end with every failure listed.
  for (const std::string& out : proto.output()) {
    if (out.empty()) continue;
    poisoned_.insert(out);
    env_.erase(out);
  }
}

void Importer::throw_failures() const {
  if (failures_.size() == 1) throw ExportError(failures_[0].message);  // what the skipped readers add is noise
  std::map<std::string, int> by_type;
  for (const Failure& f : failures_) ++by_type[f.op_type];
  std::string types;
  for (const auto& [op, n] : by_type) types += (types.empty() ? "" : ", ") + op + " x" + std::to_string(n);
  std::string msg = "onnx: " + std::to_string(failures_.size()) + " node" + (failures_.size() == 1 ? "" : "s") +
                    " could not be imported (" + types + ")";
  if (skipped_nodes_ > 0) msg += "; " + std::to_string(skipped_nodes_) + " more read their outputs and were not tried";
  msg += ":";
  constexpr size_t kMaxListed = 40;
  for (size_t i = 0; i < failures_.size() && i < kMaxListed; ++i) msg += "\n  " + failures_[i].message;
  if (failures_.size() > kMaxListed) msg += "\n  ... and " + std::to_string(failures_.size() - kMaxListed) + " more";
  throw ExportError(msg);
}

void Importer::bind_outputs() {
  for (const auto& out : model_.graph().output()) {
    const std::string what = "onnx: graph output '" + out.name() + "'";
    auto it = env_.find(out.name());
    if (it == env_.end()) throw ExportError(what + " is not produced by any node");
    Entry& e = *it->second;
    if (e.value < 0 || value(e.value).is_constant()) {
      throw ExportError(what + " is computed entirely at export (it does not depend on the graph inputs); "
                        "Ember programs output run-time tensors only");
    }
    int id = e.value;
    if (graph_.is_input(id) || graph_.is_output(id)) {
      // The same tensor twice (or an input passed through): a copy via an identity reshape.
      onnx::NodeProto copy;
      copy.set_op_type("Identity");
      copy.set_name(out.name() + "/copy");
      NodeContext ctx(copy, copy.name(), stats_.opset);
      std::vector<SymInt> dims;
      for (const Dim& d : value(id).dims) dims.push_back(dim_sym(d));
      id = emit_reshape(ctx, id, dims, out.name() + "/copy", "", false);
    }
    graph_.outputs.push_back(NamedValue{out.name(), id});
  }
  if (graph_.outputs.empty()) throw ExportError("onnx: the graph has no outputs");
}

OnnxImport Importer::run() {
  const auto start = std::chrono::steady_clock::now();
  if (!model_.has_graph()) throw ExportError("onnx: the model has no graph");
  stats_.ir_version = model_.ir_version();
  stats_.producer = model_.producer_name() + (model_.producer_version().empty() ? "" : " " + model_.producer_version());
  read_opsets();
  flatten_nodes();
  stats_.onnx_nodes = nodes_.size();
  declare_inputs();
  read_initializers();
  for (const auto& out : model_.graph().output()) graph_output_names_.insert(out.name());
  for (const FlatNode& n : nodes_) {
    // Identity/Dropout become aliases: their readers are counted at their outputs instead.
    const bool alias = (n.proto.op_type() == "Identity" || n.proto.op_type() == "Dropout") &&
                       (n.proto.domain().empty() || n.proto.domain() == "ai.onnx");
    for (int i = alias ? 1 : 0; i < n.proto.input_size(); ++i) {
      if (!n.proto.input(i).empty()) ++use_count_[n.proto.input(i)];
    }
  }
  count_subgraph_readers();
  inference_ = std::make_unique<ShapeInference>(graph_);
  for (size_t v = 0; v < graph_.values.size(); ++v) inference_->add_source(static_cast<int>(v));
  for (size_t i = 0; i < nodes_.size(); ++i) convert_or_record(nodes_[i], i);
  if (!failures_.empty()) throw_failures();
  bind_outputs();
  remove_dead_code(graph_);
  graph_.check_structure();
  stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  OnnxImport result;
  result.graph = std::move(graph_);
  result.stats = std::move(stats_);
  return result;
}

}  // namespace onnx_detail

using onnx_detail::Importer;

OnnxImport import_onnx_model(const onnx::ModelProto& model, const std::string& base_dir, const OnnxImportOptions& options) {
  Importer importer(model, base_dir, options);
  return importer.run();
}

OnnxImport import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const OnnxImportOptions& options,
                             const std::string& source) {
  onnx::ModelProto model;
  parse_onnx_model(bytes, source, &model);
  return import_onnx_model(model, base_dir, options);
}

OnnxImport import_onnx_file(const std::string& path, const OnnxImportOptions& options) {
  namespace fs = std::filesystem;
  std::string bytes;
  try {
    // A regular file only (a FIFO or device is refused without blocking), read exactly.
    const tools::RegularFile file = tools::RegularFile::open(path, std::numeric_limits<uint64_t>::max(), "onnx:");
    if (file.size() >= (uint64_t{1} << 31)) {
      throw ExportError("onnx: '" + path + "' is " + std::to_string(file.size()) +
                        " bytes; protobuf messages are limited to 2 GiB: save the weights as external data "
                        "(onnx.save_model(model, path, save_as_external_data=True))");
    }
    bytes = file.read_all();
  } catch (const tools::HostIoError& e) {
    throw ExportError(e.what());
  }
  const fs::path parent = fs::path(path).parent_path();
  return import_onnx_bytes(bytes, parent.empty() ? "." : parent.string(), options, path);
}

std::string format_import_summary(const OnnxImportStats& s) {
  std::string out = "onnx: opset " + std::to_string(s.opset) + ", ir " + std::to_string(s.ir_version) + ", producer " +
                    (s.producer.empty() ? "?" : s.producer) + "; " + std::to_string(s.onnx_nodes) + " nodes:";
  for (const auto& [op, count] : s.onnx_ops) out += " " + op + " x" + std::to_string(count);
  out += "\n";
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "import: %d BatchNorm folded, %d Identity/Dropout removed, %d nodes evaluated at export, "
                "%d functions inlined, %d Ifs taken at export, %d Ifs selected at run time, %d inputs bound; "
                "initializers %llu bytes (%d external); %.1f ms\n",
                s.folded_batch_norms, s.removed_identity, s.evaluated_at_export, s.inlined_functions, s.folded_ifs,
                s.selected_ifs,
                s.bound_inputs,
                static_cast<unsigned long long>(s.initializer_bytes), s.external_tensors, s.seconds * 1e3);
  return out + buf;
}

}  // namespace ember::exporter
