#include "exporter/importers/onnx/onnx_importer.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <unordered_map>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "exporter/importers/onnx/sym_int.h"
#include "exporter/importers/onnx/tensor_proto.h"
#include "exporter/passes/batch_norm_folding.h"
#include "exporter/passes/constant_folding.h"
#include "exporter/passes/evaluate.h"
#include "exporter/passes/shape_inference.h"
#include "onnx.pb.h"
#include "runtime/kernel/kernel.h"
#include "runtime/kernel/op_info.h"

namespace ember::exporter {
namespace {

constexpr int64_t kMinOpset = 11;
constexpr int64_t kMaxOpset = 21;
constexpr size_t kMaxKnownElements = 4096;  // larger integer constants stay tensors
constexpr int kMaxFunctionDepth = 16;

// ---- Export-time values ------------------------------------------------------------------------

// An integer (or bool) tensor known at export; elements may be symbolic.
struct Known {
  ScalarType dtype = ScalarType::I64;
  std::vector<int64_t> dims;
  std::vector<SymInt> elems;

  size_t numel() const { return elems.size(); }
  bool all_constant() const {
    return std::all_of(elems.begin(), elems.end(), [](const SymInt& s) { return s.is_constant(); });
  }
};

bool is_integer_dtype(ScalarType t) {
  return t == ScalarType::I64 || t == ScalarType::I32 || t == ScalarType::I16 || t == ScalarType::I8 ||
         t == ScalarType::U8 || t == ScalarType::Bool;
}

uint64_t product(const std::vector<int64_t>& dims) {
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d);
  return n;
}

int64_t read_int(const HostTensor& t, size_t i) {
  switch (t.dtype) {
    case ScalarType::I64: { int64_t v; std::memcpy(&v, t.bytes.data() + i * 8, 8); return v; }
    case ScalarType::I32: { int32_t v; std::memcpy(&v, t.bytes.data() + i * 4, 4); return v; }
    case ScalarType::I16: { int16_t v; std::memcpy(&v, t.bytes.data() + i * 2, 2); return v; }
    case ScalarType::I8: return static_cast<int8_t>(t.bytes[i]);
    case ScalarType::U8: case ScalarType::Bool: return t.bytes[i];
    default: throw ExportError("read_int on a non-integer tensor");
  }
}

double read_float(const HostTensor& t, size_t i) {
  switch (t.dtype) {
    case ScalarType::F32: { float v; std::memcpy(&v, t.bytes.data() + i * 4, 4); return v; }
    case ScalarType::F64: { double v; std::memcpy(&v, t.bytes.data() + i * 8, 8); return v; }
    case ScalarType::F16: case ScalarType::BF16: {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + i * 2, 2);
      if (t.dtype == ScalarType::BF16) {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
      }
      const int sign = (h >> 15) & 1, exp = (h >> 10) & 31, man = h & 1023;
      double v = exp == 0 ? std::ldexp(man, -24) : exp == 31 ? (man ? NAN : INFINITY) : std::ldexp(man + 1024, exp - 25);
      return sign ? -v : v;
    }
    default: return static_cast<double>(read_int(t, i));
  }
}

HostTensor known_to_tensor(const Known& k) {
  HostTensor t;
  t.dtype = k.dtype;
  t.dims = k.dims;
  t.bytes.resize(nbytes_of(k.dtype, k.numel()));
  for (size_t i = 0; i < k.numel(); ++i) {
    const int64_t v = k.elems[i].c;
    switch (k.dtype) {
      case ScalarType::I64: std::memcpy(t.bytes.data() + i * 8, &v, 8); break;
      case ScalarType::I32: { const int32_t x = static_cast<int32_t>(v); std::memcpy(t.bytes.data() + i * 4, &x, 4); break; }
      case ScalarType::I16: { const int16_t x = static_cast<int16_t>(v); std::memcpy(t.bytes.data() + i * 2, &x, 2); break; }
      case ScalarType::Bool: t.bytes[i] = v != 0; break;
      default: t.bytes[i] = static_cast<uint8_t>(v); break;
    }
  }
  return t;
}

// What an ONNX value name is bound to.
struct Entry {
  int value = -1;                              // an Ember value (run-time, or a materialized constant)
  std::shared_ptr<const HostTensor> constant;  // export-time data (materialized into `value` on demand)
  std::shared_ptr<const Known> known;          // export-time integers, possibly symbolic
};

// ---- One ONNX node and its attributes ----------------------------------------------------------

const char* attr_type_name(int t) {
  switch (t) {
    case onnx::AttributeProto::FLOAT: return "FLOAT";
    case onnx::AttributeProto::INT: return "INT";
    case onnx::AttributeProto::STRING: return "STRING";
    case onnx::AttributeProto::TENSOR: return "TENSOR";
    case onnx::AttributeProto::GRAPH: return "GRAPH";
    case onnx::AttributeProto::FLOATS: return "FLOATS";
    case onnx::AttributeProto::INTS: return "INTS";
    case onnx::AttributeProto::STRINGS: return "STRINGS";
    case onnx::AttributeProto::SPARSE_TENSOR: return "SPARSE_TENSOR";
    default: return "UNDEFINED";
  }
}

class NodeContext {
 public:
  NodeContext(const onnx::NodeProto& proto, std::string name, int64_t opset)
      : proto_(proto), name_(std::move(name)), opset_(opset) {}

  const onnx::NodeProto& proto() const { return proto_; }
  const std::string& op_type() const { return proto_.op_type(); }
  const std::string& name() const { return name_; }
  int64_t opset() const { return opset_; }
  std::string where() const {
    return "onnx: " + proto_.op_type() + " node '" + name_ + "' (opset " + std::to_string(opset_) + ")";
  }
  [[noreturn]] void fail(const std::string& why) const { throw ExportError(where() + ": " + why); }

  size_t input_count() const { return static_cast<size_t>(proto_.input_size()); }
  bool has_input(size_t i) const { return i < input_count() && !proto_.input(static_cast<int>(i)).empty(); }
  const std::string& input(size_t i) const { return proto_.input(static_cast<int>(i)); }
  size_t output_count() const { return static_cast<size_t>(proto_.output_size()); }
  bool has_output(size_t i) const { return i < output_count() && !proto_.output(static_cast<int>(i)).empty(); }
  const std::string& output(size_t i) const { return proto_.output(static_cast<int>(i)); }

  const onnx::AttributeProto* find(const std::string& attr) {
    for (const auto& a : proto_.attribute()) {
      if (a.name() == attr) {
        used_.insert(attr);
        if (!a.ref_attr_name().empty()) fail("attribute '" + attr + "' refers to a function attribute outside a function");
        return &a;
      }
    }
    return nullptr;
  }
  bool has_attr(const std::string& attr) {
    for (const auto& a : proto_.attribute()) {
      if (a.name() == attr) return true;
    }
    return false;
  }
  void ignore_attr(const std::string& attr) { used_.insert(attr); }

  int64_t attr_int(const std::string& attr, int64_t def) {
    const onnx::AttributeProto* a = find(attr);
    if (a == nullptr) return def;
    expect(*a, onnx::AttributeProto::INT, a->has_i());
    return a->i();
  }
  float attr_float(const std::string& attr, float def) {
    const onnx::AttributeProto* a = find(attr);
    if (a == nullptr) return def;
    expect(*a, onnx::AttributeProto::FLOAT, a->has_f());
    return a->f();
  }
  std::string attr_string(const std::string& attr, const std::string& def) {
    const onnx::AttributeProto* a = find(attr);
    if (a == nullptr) return def;
    expect(*a, onnx::AttributeProto::STRING, a->has_s());
    return a->s();
  }
  bool attr_ints(const std::string& attr, std::vector<int64_t>* out) {
    const onnx::AttributeProto* a = find(attr);
    if (a == nullptr) return false;
    expect(*a, onnx::AttributeProto::INTS, a->ints_size() > 0);
    out->assign(a->ints().begin(), a->ints().end());
    return true;
  }
  bool attr_floats(const std::string& attr, std::vector<float>* out) {
    const onnx::AttributeProto* a = find(attr);
    if (a == nullptr) return false;
    expect(*a, onnx::AttributeProto::FLOATS, a->floats_size() > 0);
    out->assign(a->floats().begin(), a->floats().end());
    return true;
  }
  const onnx::TensorProto* attr_tensor(const std::string& attr) {
    const onnx::AttributeProto* a = find(attr);
    if (a == nullptr) return nullptr;
    expect(*a, onnx::AttributeProto::TENSOR, a->has_t());
    return &a->t();
  }

  // Every attribute the handler did not read is unsupported.
  void check_attributes_used() const {
    for (const auto& a : proto_.attribute()) {
      if (!used_.count(a.name())) fail("attribute '" + a.name() + "' is not supported");
    }
  }

 private:
  void expect(const onnx::AttributeProto& a, onnx::AttributeProto::AttributeType type, bool present_untyped) const {
    if (a.type() == type || (a.type() == onnx::AttributeProto::UNDEFINED && present_untyped)) return;
    fail(std::string("attribute '") + a.name() + "' has type " + attr_type_name(a.type()) + ", expected " +
         attr_type_name(type));
  }

  const onnx::NodeProto& proto_;
  std::string name_;
  int64_t opset_;
  std::set<std::string> used_;
};

// A node after function inlining, with the opset of its own domain.
struct FlatNode {
  onnx::NodeProto proto;
  int64_t opset = 0;
};

int normalize_axis(const NodeContext& ctx, int64_t axis, size_t rank, const char* what = "axis") {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    ctx.fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

// ---- The importer ------------------------------------------------------------------------------

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string base_dir, const OnnxImportOptions& options)
      : model_(model), options_(options) {
    read_options_.base_dir = std::move(base_dir);
  }

  OnnxImport run();

 private:
  using Handler = void (Importer::*)(NodeContext&);

  // Setup.
  void read_opsets();
  void flatten_nodes();
  void inline_node(const onnx::NodeProto& node, int64_t opset, const std::string& prefix, int depth,
                   std::vector<FlatNode>& out);
  void declare_inputs();
  void read_initializers();
  void convert_node(const FlatNode& node, size_t index);
  void bind_outputs();

  // Values.
  Entry& entry(const NodeContext& ctx, size_t i);
  void define(const NodeContext& ctx, size_t output, Entry e);
  void define_value(const NodeContext& ctx, size_t output, int value) { define(ctx, output, Entry{value, nullptr, nullptr}); }
  void define_constant(const NodeContext& ctx, size_t output, HostTensor t);
  void define_known(const NodeContext& ctx, size_t output, Known k);
  int value_of(const NodeContext& ctx, size_t i);
  int materialize(Entry& e, const std::string& name);
  const HostTensor* constant_of(const NodeContext& ctx, size_t i);
  const Known* known_of(const NodeContext& ctx, size_t i);
  std::vector<SymInt> dims_of(const NodeContext& ctx, size_t i);
  size_t rank_of(const NodeContext& ctx, size_t i);
  ScalarType dtype_of(const NodeContext& ctx, size_t i);
  const Value& value(int id) const { return graph_.values[static_cast<size_t>(id)]; }
  // A constant scalar input as double (absent: `def`).
  double scalar_of(const NodeContext& ctx, size_t i, double def, const char* what);
  std::vector<int64_t> ints_of(const NodeContext& ctx, size_t i, const char* what);
  bool is_graph_output(const std::string& name) const { return graph_output_names_.count(name) != 0; }
  int use_count(const std::string& name) const {
    auto it = use_count_.find(name);
    return it == use_count_.end() ? 0 : it->second;
  }
  // ONNX readers (nodes and graph outputs) of every name bound to Ember value `v` so far: an
  // Identity alias and its source count together.
  int value_readers(int v) const {
    int n = 0;
    for (const auto& [name, e] : env_) {
      if (e->value == v) n += use_count(name) + (is_graph_output(name) ? 1 : 0);
    }
    return n;
  }

  // Emitting Ember nodes: returns the output value ids; inputs all constant -> folded at once.
  std::vector<int> emit(const NodeContext& ctx, OpCode op, std::vector<int> inputs, OpAttrs attrs,
                        const std::string& out_name, const std::string& suffix = "");
  int emit1(const NodeContext& ctx, OpCode op, std::vector<int> inputs, OpAttrs attrs, const std::string& out_name,
            const std::string& suffix = "") {
    return emit(ctx, op, std::move(inputs), attrs, out_name, suffix).at(0);
  }
  int add_constant(const std::string& name, HostTensor t);
  int emit_reshape(const NodeContext& ctx, int x, const std::vector<SymInt>& target, const std::string& out_name,
                   const std::string& suffix = "", bool allow_alias = true);
  std::string unique_value_name(const std::string& base) const;
  std::string unique_node_name(const std::string& base);
  SymInt dim_sym(const Dim& d) const { return d.sym ? SymInt::symbol(d.sym) : SymInt::constant(d.max); }
  std::string fmt(const std::vector<SymInt>& v) const;

  // Export-time evaluation of integer "shape values"; true when handled.
  bool try_known(NodeContext& ctx);

  // Handlers.
  void op_constant(NodeContext& ctx);
  void op_identity(NodeContext& ctx);
  void op_dropout(NodeContext& ctx);
  void op_shape(NodeContext& ctx);
  void op_size(NodeContext& ctx);
  void op_conv(NodeContext& ctx);
  void op_gemm(NodeContext& ctx);
  void op_matmul(NodeContext& ctx);
  void op_binary(NodeContext& ctx);
  void op_pow(NodeContext& ctx);
  void op_unary(NodeContext& ctx);
  void op_gelu(NodeContext& ctx);
  void op_clip(NodeContext& ctx);
  void op_hard_sigmoid(NodeContext& ctx);
  void op_softmax(NodeContext& ctx);
  void op_pool(NodeContext& ctx);
  void op_global_average_pool(NodeContext& ctx);
  void op_batch_norm(NodeContext& ctx);
  void op_layer_norm(NodeContext& ctx);
  void op_flatten(NodeContext& ctx);
  void op_reshape(NodeContext& ctx);
  void op_squeeze(NodeContext& ctx);
  void op_unsqueeze(NodeContext& ctx);
  void op_transpose(NodeContext& ctx);
  void op_concat(NodeContext& ctx);
  void op_slice(NodeContext& ctx);
  void op_split(NodeContext& ctx);
  void op_gather(NodeContext& ctx);
  void op_where(NodeContext& ctx);
  void op_equal(NodeContext& ctx);
  void op_cast(NodeContext& ctx);
  void op_expand(NodeContext& ctx);
  void op_pad(NodeContext& ctx);
  void op_reduce(NodeContext& ctx);
  void op_constant_of_shape(NodeContext& ctx);
  void op_range(NodeContext& ctx);
  void op_quantized(NodeContext& ctx);
  static const std::map<std::string, Handler>& handlers();

  // Shared pieces.
  std::vector<int64_t> squeeze_axes(NodeContext& ctx, size_t rank, bool unsqueeze, size_t out_rank);
  void conv_like_padding(NodeContext& ctx, const std::vector<SymInt>& in_dims, const int64_t kernel[2],
                         const int32_t stride[2], const int32_t dilation[2], int32_t padding[4], bool ceil_mode);
  bool try_fuse_bias(NodeContext& ctx);
  void define_alias(NodeContext& ctx, size_t output, size_t input);

  const onnx::ModelProto& model_;
  OnnxImportOptions options_;
  TensorReadOptions read_options_;
  OnnxImportStats stats_;
  std::map<std::string, int64_t> opsets_;  // domain ("" = default) -> version
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions_;
  std::vector<FlatNode> nodes_;

  Graph graph_;
  std::unique_ptr<ShapeInference> inference_;
  // Aliases (Identity, Dropout, fused ops) share one Entry, so a constant is materialized once.
  std::unordered_map<std::string, std::shared_ptr<Entry>> env_;
  std::unordered_map<std::string, int> use_count_;
  std::set<std::string> graph_output_names_;
  std::set<std::string> node_names_;
  std::set<std::string> value_names_;
  size_t declared_symbols_ = 0;
};

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
          if (od.has_dim_value() && (d.size < 0 || d.size != od.dim_value())) {
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
                          (param.empty() ? std::string("unknown") : "symbolic ('" + param + "')") +
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
  for (const auto& init : model_.graph().initializer()) {
    const std::string what = "onnx: initializer '" + init.name() + "'";
    if (init.data_location() == onnx::TensorProto::EXTERNAL) ++stats_.external_tensors;
    auto t = std::make_shared<HostTensor>(read_tensor_proto(init, read_options_, what));
    stats_.initializer_bytes += t->bytes.size();
    env_[init.name()] = std::make_shared<Entry>(Entry{-1, std::move(t), nullptr});
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

  // Inputs all constant: fold now with the reference kernels (so later nodes see constants).
  bool all_constant = !node.inputs.empty();
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

// ---- Export-time shape values ------------------------------------------------------------------

namespace known_ops {

// Numpy broadcasting of known tensors.
bool broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out) {
  const size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*out)[i] = da == 1 ? db : da;
  }
  return true;
}

size_t broadcast_index(const std::vector<int64_t>& out_dims, size_t flat, const std::vector<int64_t>& in_dims) {
  size_t idx = 0, stride = 1;
  for (size_t k = 0; k < in_dims.size(); ++k) {
    const size_t axis_out = out_dims.size() - 1 - k;
    const size_t axis_in = in_dims.size() - 1 - k;
    size_t rem = flat;
    for (size_t j = out_dims.size() - 1; j > axis_out; --j) rem /= static_cast<size_t>(out_dims[j]);
    const size_t coord = rem % static_cast<size_t>(out_dims[axis_out]);
    if (in_dims[axis_in] != 1) idx += coord * stride;
    stride *= static_cast<size_t>(in_dims[axis_in]);
  }
  return idx;
}

std::vector<size_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<size_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * static_cast<size_t>(dims[i]);
  return s;
}

}  // namespace known_ops

bool Importer::try_known(NodeContext& ctx) {
  const std::string& op = ctx.op_type();
  using namespace known_ops;
  auto all_known = [&](size_t first, size_t last) {
    for (size_t i = first; i < last && i < ctx.input_count(); ++i) {
      if (ctx.has_input(i) && known_of(ctx, i) == nullptr) return false;
    }
    return true;
  };
  auto finish = [&](Known k, size_t output = 0) {
    ++stats_.evaluated_at_export;
    define_known(ctx, output, std::move(k));
  };

  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal" || op == "Less" ||
      op == "Greater" || op == "Max" || op == "Min" || op == "Mod" || op == "And" || op == "Or") {
    if (ctx.input_count() < 2 || !all_known(0, ctx.input_count())) return false;
    const Known* a = known_of(ctx, 0);
    Known acc = *a;
    for (size_t in = 1; in < ctx.input_count(); ++in) {
      const Known* b = known_of(ctx, in);
      if ((op != "Max" && op != "Min") && in > 1) ctx.fail("takes 2 inputs");
      Known r;
      if (!broadcast(acc.dims, b->dims, &r.dims)) ctx.fail("shapes do not broadcast");
      const bool compare = op == "Equal" || op == "Less" || op == "Greater";
      r.dtype = compare ? ScalarType::Bool : acc.dtype;
      const size_t n = product(r.dims);
      for (size_t i = 0; i < n; ++i) {
        const SymInt& x = acc.elems[broadcast_index(r.dims, i, acc.dims)];
        const SymInt& y = b->elems[broadcast_index(r.dims, i, b->dims)];
        SymInt v;
        if (op == "Add") v = sym_add(x, y);
        else if (op == "Sub") v = sym_sub(x, y);
        else if (op == "Mul") v = sym_mul(x, y);
        else if (op == "Div") {
          if (y.is_constant() && y.c == 0) ctx.fail("integer division by zero");
          v = sym_div(x, y);
        } else if (op == "Mod") {
          if (!x.is_constant() || !y.is_constant() || y.c == 0) return false;
          v = SymInt::constant(ctx.attr_int("fmod", 0) ? x.c % y.c : ((x.c % y.c) + y.c) % y.c);
        } else if (op == "Max") v = sym_max(x, y, graph_);
        else if (op == "Min") v = sym_min(x, y, graph_);
        else if (op == "And" || op == "Or") {
          if (!x.is_constant() || !y.is_constant()) v = SymInt::unknown();
          else v = SymInt::constant(op == "And" ? (x.c && y.c) : (x.c || y.c));
        } else {
          const int t = op == "Equal" ? sym_equal(x, y, graph_) : op == "Less" ? sym_less(x, y, graph_) : sym_less(y, x, graph_);
          v = t < 0 ? SymInt::unknown() : SymInt::constant(t);
        }
        r.elems.push_back(v);
      }
      acc = std::move(r);
    }
    finish(std::move(acc));
    return true;
  }
  if (op == "Neg" || op == "Abs" || op == "Not" || op == "Identity") {
    if (!all_known(0, 1)) return false;
    Known r = *known_of(ctx, 0);
    for (SymInt& s : r.elems) {
      if (op == "Neg") s = sym_neg(s);
      else if (op == "Abs") s = s.is_constant() ? SymInt::constant(s.c < 0 ? -s.c : s.c) : (s.c > 0 ? s : SymInt::unknown());
      else if (op == "Not") s = s.is_constant() ? SymInt::constant(!s.c) : SymInt::unknown();
    }
    finish(std::move(r));
    return true;
  }
  if (op == "Where") {
    if (!all_known(0, 3)) return false;
    const Known *c = known_of(ctx, 0), *x = known_of(ctx, 1), *y = known_of(ctx, 2);
    Known r;
    std::vector<int64_t> tmp;
    if (!broadcast(c->dims, x->dims, &tmp) || !broadcast(tmp, y->dims, &r.dims)) ctx.fail("shapes do not broadcast");
    r.dtype = x->dtype;
    for (size_t i = 0; i < product(r.dims); ++i) {
      const SymInt& cv = c->elems[broadcast_index(r.dims, i, c->dims)];
      const SymInt& xv = x->elems[broadcast_index(r.dims, i, x->dims)];
      const SymInt& yv = y->elems[broadcast_index(r.dims, i, y->dims)];
      if (cv.is_constant()) r.elems.push_back(cv.c ? xv : yv);
      else r.elems.push_back(xv.same_as(yv) ? xv : SymInt::unknown());
    }
    finish(std::move(r));
    return true;
  }
  if (op == "Cast") {
    if (!all_known(0, 1)) return false;
    const int64_t to = ctx.attr_int("to", 0);
    ctx.ignore_attr("saturate");
    const ScalarType t = map_onnx_dtype(static_cast<int32_t>(to), ctx.where() + ": attribute 'to'");
    Known r = *known_of(ctx, 0);
    if (is_integer_dtype(t)) {
      r.dtype = t;
      for (SymInt& s : r.elems) {
        if (t == ScalarType::Bool) s = s.is_constant() ? SymInt::constant(s.c != 0) : SymInt::unknown();
        else if (s.is_constant() && t != ScalarType::I64) {
          // Wrap like a C cast of two's complement.
          const int bits = bits_of(t);
          int64_t v = s.c & ((bits == 64) ? -1 : ((int64_t{1} << bits) - 1));
          if (t != ScalarType::U8 && bits < 64 && (v >> (bits - 1)) & 1) v -= int64_t{1} << bits;
          s = SymInt::constant(v);
        }
      }
      finish(std::move(r));
      return true;
    }
    // To a float type: a constant tensor (only when every element is known).
    for (const SymInt& s : r.elems) {
      if (!s.is_constant()) {
        ctx.fail("casts " + fmt(r.elems) + " to " + onnx_dtype_name(static_cast<int32_t>(to)) +
                 ", which depends on run-time sizes; only constant values can become float tensors at export");
      }
    }
    HostTensor f;
    f.dtype = t == ScalarType::F64 ? ScalarType::F32 : t;
    if (f.dtype != ScalarType::F32) return false;
    f.dims = r.dims;
    f.bytes.resize(r.numel() * 4);
    for (size_t i = 0; i < r.numel(); ++i) {
      const float v = static_cast<float>(r.elems[i].c);
      std::memcpy(f.bytes.data() + i * 4, &v, 4);
    }
    ++stats_.evaluated_at_export;
    define_constant(ctx, 0, std::move(f));
    return true;
  }
  if (op == "Gather") {
    if (!all_known(0, 2)) return false;
    const Known* data = known_of(ctx, 0);
    const Known* idx = known_of(ctx, 1);
    const int axis = normalize_axis(ctx, ctx.attr_int("axis", 0), data->dims.size());
    Known r;
    r.dtype = data->dtype;
    for (int i = 0; i < axis; ++i) r.dims.push_back(data->dims[static_cast<size_t>(i)]);
    for (int64_t d : idx->dims) r.dims.push_back(d);
    for (size_t i = static_cast<size_t>(axis) + 1; i < data->dims.size(); ++i) r.dims.push_back(data->dims[i]);
    const int64_t n_axis = data->dims[static_cast<size_t>(axis)];
    size_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= static_cast<size_t>(data->dims[static_cast<size_t>(i)]);
    for (size_t i = static_cast<size_t>(axis) + 1; i < data->dims.size(); ++i) inner *= static_cast<size_t>(data->dims[i]);
    for (size_t o = 0; o < outer; ++o) {
      for (const SymInt& ix : idx->elems) {
        if (!ix.is_constant()) ctx.fail("gathers shape values at a run-time index " + format_sym(ix, graph_));
        int64_t k = ix.c < 0 ? ix.c + n_axis : ix.c;
        if (k < 0 || k >= n_axis) ctx.fail("index " + std::to_string(ix.c) + " is out of range for " + std::to_string(n_axis));
        for (size_t in = 0; in < inner; ++in) {
          r.elems.push_back(data->elems[(o * static_cast<size_t>(n_axis) + static_cast<size_t>(k)) * inner + in]);
        }
      }
    }
    finish(std::move(r));
    return true;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    if (!all_known(0, 1)) return false;
    const Known* data = known_of(ctx, 0);
    const bool unsq = op == "Unsqueeze";
    size_t n_axes = 0;
    if (ctx.opset() >= 13) {
      if (ctx.has_input(1)) n_axes = ints_of(ctx, 1, "axes").size();
    } else if (ctx.has_attr("axes")) {
      std::vector<int64_t> tmp;
      ctx.attr_ints("axes", &tmp);
      n_axes = tmp.size();
    }
    const std::vector<int64_t> axes = squeeze_axes(ctx, data->dims.size(), unsq, unsq ? data->dims.size() + n_axes : data->dims.size());
    Known r = *data;
    if (unsq) {
      std::vector<int64_t> dims;
      size_t src = 0;
      for (size_t i = 0; i < data->dims.size() + axes.size(); ++i) {
        dims.push_back(std::count(axes.begin(), axes.end(), static_cast<int64_t>(i)) ? 1 : data->dims[src++]);
      }
      r.dims = dims;
    } else {
      std::vector<int64_t> dims;
      for (size_t i = 0; i < data->dims.size(); ++i) {
        const bool drop = axes.empty() ? data->dims[i] == 1 : std::count(axes.begin(), axes.end(), static_cast<int64_t>(i)) > 0;
        if (drop && data->dims[i] != 1) ctx.fail("squeezes axis " + std::to_string(i) + " of size " + std::to_string(data->dims[i]));
        if (!drop) dims.push_back(data->dims[i]);
      }
      r.dims = dims;
    }
    finish(std::move(r));
    return true;
  }
  if (op == "Concat") {
    if (!all_known(0, ctx.input_count())) return false;
    const Known* first = known_of(ctx, 0);
    const int axis = normalize_axis(ctx, ctx.attr_int("axis", 0), first->dims.size());
    Known r;
    r.dtype = first->dtype;
    r.dims = first->dims;
    r.dims[static_cast<size_t>(axis)] = 0;
    std::vector<const Known*> parts;
    for (size_t i = 0; i < ctx.input_count(); ++i) {
      if (!ctx.has_input(i)) continue;
      const Known* k = known_of(ctx, i);
      if (k->dims.size() != first->dims.size()) ctx.fail("inputs differ in rank");
      for (size_t d = 0; d < k->dims.size(); ++d) {
        if (static_cast<int>(d) != axis && k->dims[d] != first->dims[d]) ctx.fail("inputs differ off the concat axis");
      }
      r.dims[static_cast<size_t>(axis)] += k->dims[static_cast<size_t>(axis)];
      parts.push_back(k);
    }
    size_t outer = 1;
    for (int i = 0; i < axis; ++i) outer *= static_cast<size_t>(first->dims[static_cast<size_t>(i)]);
    for (size_t o = 0; o < outer; ++o) {
      for (const Known* k : parts) {
        const size_t chunk = outer == 0 ? 0 : k->numel() / outer;
        for (size_t j = 0; j < chunk; ++j) r.elems.push_back(k->elems[o * chunk + j]);
      }
    }
    finish(std::move(r));
    return true;
  }
  if (op == "Slice") {
    if (!all_known(0, 1)) return false;
    const Known* data = known_of(ctx, 0);
    const std::vector<int64_t> starts = ints_of(ctx, 1, "starts"), ends = ints_of(ctx, 2, "ends");
    std::vector<int64_t> axes, steps;
    if (ctx.has_input(3)) axes = ints_of(ctx, 3, "axes");
    else for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (ctx.has_input(4)) steps = ints_of(ctx, 4, "steps");
    else steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
      ctx.fail("starts/ends/axes/steps differ in length");
    }
    const size_t rank = data->dims.size();
    std::vector<int64_t> begin(rank, 0), step(rank, 1), count(rank);
    for (size_t i = 0; i < rank; ++i) count[i] = data->dims[i];
    for (size_t j = 0; j < axes.size(); ++j) {
      const int ax = normalize_axis(ctx, axes[j], rank);
      const int64_t dim = data->dims[static_cast<size_t>(ax)];
      if (steps[j] == 0) ctx.fail("step 0");
      int64_t s = starts[j], e = ends[j];
      if (s < 0) s += dim;
      if (e < 0) e += dim;
      if (steps[j] > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        count[static_cast<size_t>(ax)] = e > s ? (e - s + steps[j] - 1) / steps[j] : 0;
      } else {
        s = std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        count[static_cast<size_t>(ax)] = s > e ? (s - e + (-steps[j]) - 1) / (-steps[j]) : 0;
      }
      begin[static_cast<size_t>(ax)] = s;
      step[static_cast<size_t>(ax)] = steps[j];
    }
    Known r;
    r.dtype = data->dtype;
    r.dims = count;
    const auto in_strides = strides_of(data->dims);
    const size_t n = product(count);
    for (size_t flat = 0; flat < n; ++flat) {
      size_t rem = flat, src = 0;
      for (size_t d = rank; d-- > 0;) {
        const size_t c = rem % static_cast<size_t>(count[d]);
        rem /= static_cast<size_t>(count[d]);
        src += static_cast<size_t>(begin[d] + static_cast<int64_t>(c) * step[d]) * in_strides[d];
      }
      r.elems.push_back(data->elems[src]);
    }
    finish(std::move(r));
    return true;
  }
  if (op == "Reshape" || op == "Flatten" || op == "Expand" || op == "Transpose") {
    if (!all_known(0, 1)) return false;
    const Known* data = known_of(ctx, 0);
    Known r = *data;
    if (op == "Reshape") {
      std::vector<int64_t> shape = ints_of(ctx, 1, "shape");
      const bool allowzero = ctx.attr_int("allowzero", 0) != 0;
      int64_t known_prod = 1;
      int infer = -1;
      for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == 0 && !allowzero) {
          if (i >= data->dims.size()) ctx.fail("shape has 0 at dim " + std::to_string(i) + " beyond the input's rank");
          shape[i] = data->dims[i];
        }
        if (shape[i] == -1) {
          infer = static_cast<int>(i);
        } else {
          known_prod *= shape[i];
        }
      }
      if (infer >= 0) shape[static_cast<size_t>(infer)] = known_prod ? static_cast<int64_t>(data->numel()) / known_prod : 0;
      if (product(shape) != data->numel()) ctx.fail("cannot reshape " + std::to_string(data->numel()) + " elements");
      r.dims = shape;
    } else if (op == "Flatten") {
      const int64_t rank = static_cast<int64_t>(data->dims.size());
      int64_t axis = ctx.attr_int("axis", 1);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis > rank) ctx.fail("axis out of range");
      int64_t left = 1;
      for (int64_t i = 0; i < axis; ++i) left *= data->dims[static_cast<size_t>(i)];
      r.dims = {left, left ? static_cast<int64_t>(data->numel()) / left : 0};
    } else if (op == "Expand") {
      const std::vector<int64_t> shape = ints_of(ctx, 1, "shape");
      std::vector<int64_t> out;
      if (!broadcast(data->dims, shape, &out)) ctx.fail("cannot expand");
      r.dims = out;
      r.elems.clear();
      for (size_t i = 0; i < product(out); ++i) r.elems.push_back(data->elems[broadcast_index(out, i, data->dims)]);
    } else {
      std::vector<int64_t> perm;
      if (!ctx.attr_ints("perm", &perm)) {
        for (size_t i = data->dims.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
      }
      if (perm.size() != data->dims.size()) ctx.fail("perm length differs from rank");
      r.dims.clear();
      for (int64_t p : perm) r.dims.push_back(data->dims[static_cast<size_t>(normalize_axis(ctx, p, data->dims.size(), "perm"))]);
      const auto in_strides = strides_of(data->dims);
      r.elems.clear();
      for (size_t flat = 0; flat < product(r.dims); ++flat) {
        size_t rem = flat, src = 0;
        for (size_t d = r.dims.size(); d-- > 0;) {
          const size_t c = rem % static_cast<size_t>(r.dims[d]);
          rem /= static_cast<size_t>(r.dims[d]);
          src += c * in_strides[static_cast<size_t>(perm[d] < 0 ? perm[d] + static_cast<int64_t>(data->dims.size()) : perm[d])];
        }
        r.elems.push_back(data->elems[src]);
      }
    }
    finish(std::move(r));
    return true;
  }
  if (op == "ReduceProd" || op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin") {
    // Over 1-D shape values only (what flatten-like patterns use).
    if (!all_known(0, 1)) return false;
    const Known* data = known_of(ctx, 0);
    if (data->dims.size() != 1) return false;
    if (ctx.has_input(1) && ints_of(ctx, 1, "axes") != std::vector<int64_t>{0} && ints_of(ctx, 1, "axes") != std::vector<int64_t>{-1}) return false;
    std::vector<int64_t> axes_attr;
    if (ctx.attr_ints("axes", &axes_attr) && axes_attr != std::vector<int64_t>{0} && axes_attr != std::vector<int64_t>{-1}) return false;
    const bool keep = ctx.attr_int("keepdims", 1) != 0;
    ctx.ignore_attr("noop_with_empty_axes");
    SymInt acc = SymInt::constant(op == "ReduceProd" ? 1 : 0);
    for (size_t i = 0; i < data->elems.size(); ++i) {
      const SymInt& e = data->elems[i];
      if (op == "ReduceProd") acc = sym_mul(acc, e);
      else if (op == "ReduceSum") acc = sym_add(acc, e);
      else acc = i == 0 ? e : (op == "ReduceMax" ? sym_max(acc, e, graph_) : sym_min(acc, e, graph_));
    }
    Known r;
    r.dtype = data->dtype;
    if (keep) r.dims = {1};
    r.elems = {acc};
    finish(std::move(r));
    return true;
  }
  return false;
}

std::vector<int64_t> Importer::squeeze_axes(NodeContext& ctx, size_t rank, bool unsqueeze, size_t out_rank) {
  std::vector<int64_t> axes;
  if (ctx.opset() >= 13) {
    if (ctx.has_input(1)) axes = ints_of(ctx, 1, "axes");
  } else {
    ctx.attr_ints("axes", &axes);
  }
  if (unsqueeze && axes.empty()) ctx.fail("needs axes");
  const size_t r = unsqueeze ? out_rank : rank;
  for (int64_t& a : axes) a = normalize_axis(ctx, a, r);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) ctx.fail("repeats an axis");
  return axes;
}

// ---- Handlers ----------------------------------------------------------------------------------

void Importer::op_constant(NodeContext& ctx) {
  HostTensor t;
  int set = 0;
  if (const onnx::TensorProto* tp = ctx.attr_tensor("value")) {
    t = read_tensor_proto(*tp, read_options_, ctx.where() + ": attribute 'value'");
    ++set;
  }
  if (ctx.has_attr("value_float")) {
    t = HostTensor::from_f32({}, {ctx.attr_float("value_float", 0)});
    ++set;
  }
  std::vector<float> floats;
  if (ctx.has_attr("value_floats")) {
    ctx.attr_floats("value_floats", &floats);
    t = HostTensor::from_f32({static_cast<int64_t>(floats.size())}, floats);
    ++set;
  }
  auto from_ints = [&](std::vector<int64_t> v, std::vector<int64_t> dims) {
    HostTensor r;
    r.dtype = ScalarType::I64;
    r.dims = std::move(dims);
    r.bytes.resize(v.size() * 8);
    if (!v.empty()) std::memcpy(r.bytes.data(), v.data(), r.bytes.size());
    return r;
  };
  if (ctx.has_attr("value_int")) {
    t = from_ints({ctx.attr_int("value_int", 0)}, {});
    ++set;
  }
  if (ctx.has_attr("value_ints")) {
    std::vector<int64_t> v;
    ctx.attr_ints("value_ints", &v);
    t = from_ints(v, {static_cast<int64_t>(v.size())});
    ++set;
  }
  for (const char* unsupported : {"sparse_value", "value_string", "value_strings"}) {
    if (ctx.has_attr(unsupported)) ctx.fail(std::string("attribute '") + unsupported + "' is not supported");
  }
  if (set != 1) ctx.fail("needs exactly one value attribute");
  ++stats_.evaluated_at_export;
  define_constant(ctx, 0, std::move(t));
}

void Importer::op_identity(NodeContext& ctx) {
  ++stats_.removed_identity;
  define_alias(ctx, 0, 0);
}

void Importer::op_dropout(NodeContext& ctx) {
  ctx.ignore_attr("seed");
  ctx.ignore_attr("ratio");  // opset < 12
  if (ctx.has_input(2) && scalar_of(ctx, 2, 0, "training_mode") != 0) {
    ctx.fail("training_mode=true is not supported (export the model in eval mode)");
  }
  if (ctx.has_output(1) && (use_count(ctx.output(1)) > 0 || is_graph_output(ctx.output(1)))) {
    ctx.fail("output 1 (mask '" + ctx.output(1) + "') is used; only inference Dropout is supported");
  }
  ++stats_.removed_identity;
  define_alias(ctx, 0, 0);
}

void Importer::op_shape(NodeContext& ctx) {
  const std::vector<SymInt> dims = dims_of(ctx, 0);
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t start = ctx.attr_int("start", 0), end = ctx.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  Known k;
  k.dtype = ScalarType::I64;
  for (int64_t i = start; i < end; ++i) {
    SymInt s = dims[static_cast<size_t>(i)];
    // Derived symbols are not bound at run time by inputs: keep their identity only for same_as().
    k.elems.push_back(s);
  }
  k.dims = {static_cast<int64_t>(k.elems.size())};
  ++stats_.evaluated_at_export;
  define_known(ctx, 0, std::move(k));
}

void Importer::op_size(NodeContext& ctx) {
  SymInt n = SymInt::constant(1);
  for (const SymInt& d : dims_of(ctx, 0)) n = sym_mul(n, d);
  Known k;
  k.elems = {n};
  ++stats_.evaluated_at_export;
  define_known(ctx, 0, std::move(k));
}

void Importer::conv_like_padding(NodeContext& ctx, const std::vector<SymInt>& in_dims, const int64_t kernel[2],
                                 const int32_t stride[2], const int32_t dilation[2], int32_t padding[4], bool ceil_mode) {
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads;
  const bool has_pads = ctx.attr_ints("pads", &pads);
  if (auto_pad == "NOTSET") {
    if (has_pads) {
      if (pads.size() != 4) ctx.fail("attribute 'pads' has " + std::to_string(pads.size()) + " values; 2-D needs 4");
      for (int i = 0; i < 4; ++i) {
        if (pads[static_cast<size_t>(i)] < 0 || pads[static_cast<size_t>(i)] > INT32_MAX) ctx.fail("attribute 'pads' has a negative or huge value");
      }
      // ONNX [h_begin, w_begin, h_end, w_end] = Ember [top, left, bottom, right].
      for (int i = 0; i < 4; ++i) padding[i] = static_cast<int32_t>(pads[static_cast<size_t>(i)]);
    }
    return;
  }
  if (auto_pad == "VALID") return;
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    ctx.fail("attribute 'auto_pad' = '" + auto_pad + "' is not supported");
  }
  if (ceil_mode) ctx.fail("auto_pad " + auto_pad + " with ceil_mode=1 is not supported");
  for (int i = 0; i < 2; ++i) {
    const SymInt& in = in_dims[2 + static_cast<size_t>(i)];
    const int64_t k_eff = (kernel[i] - 1) * dilation[i] + 1;
    int64_t total = 0;
    if (in.is_constant()) {
      const int64_t out = (in.c + stride[i] - 1) / stride[i];
      total = std::max<int64_t>(0, (out - 1) * stride[i] + k_eff - in.c);
    } else if (stride[i] == 1) {
      total = k_eff - 1;
    } else {
      ctx.fail("auto_pad " + auto_pad + " with stride " + std::to_string(stride[i]) + " on a run-time spatial size (" +
               format_sym(in, graph_) + ") is not supported");
    }
    const int64_t small = total / 2, large = total - small;
    padding[i] = static_cast<int32_t>(auto_pad == "SAME_UPPER" ? small : large);       // begin
    padding[i + 2] = static_cast<int32_t>(auto_pad == "SAME_UPPER" ? large : small);   // end
  }
}

namespace {
bool read_pair(NodeContext& ctx, const char* attr, int32_t out[2]) {
  std::vector<int64_t> v;
  if (!ctx.attr_ints(attr, &v)) return false;
  if (v.size() != 2) ctx.fail(std::string("attribute '") + attr + "' has " + std::to_string(v.size()) + " values; only 2-D is supported");
  for (int i = 0; i < 2; ++i) {
    if (v[static_cast<size_t>(i)] < 1 || v[static_cast<size_t>(i)] > INT32_MAX) ctx.fail(std::string("attribute '") + attr + "' must be positive");
    out[i] = static_cast<int32_t>(v[static_cast<size_t>(i)]);
  }
  return true;
}
}  // namespace

void Importer::op_conv(NodeContext& ctx) {
  const std::vector<SymInt> x_dims = dims_of(ctx, 0);
  const std::vector<SymInt> w_dims = dims_of(ctx, 1);
  if (w_dims.size() != 4 || x_dims.size() != 4) {
    ctx.fail("only 2-D convolutions are supported (input rank " + std::to_string(x_dims.size()) + ", weight rank " +
             std::to_string(w_dims.size()) + ")");
  }
  OpAttrs a;
  read_pair(ctx, "strides", a.stride);
  read_pair(ctx, "dilations", a.dilation);
  const int64_t group = ctx.attr_int("group", 1);
  if (group < 1 || group > INT32_MAX) ctx.fail("attribute 'group' = " + std::to_string(group) + " is invalid");
  a.groups = static_cast<int32_t>(group);
  int64_t kernel[2] = {w_dims[2].c, w_dims[3].c};
  std::vector<int64_t> ks;
  if (ctx.attr_ints("kernel_shape", &ks) && (ks.size() != 2 || ks[0] != kernel[0] || ks[1] != kernel[1])) {
    ctx.fail("attribute 'kernel_shape' does not match the weight's dims");
  }
  conv_like_padding(ctx, x_dims, kernel, a.stride, a.dilation, a.padding, false);
  const int x = value_of(ctx, 0), w = value_of(ctx, 1);
  const int b = ctx.has_input(2) ? value_of(ctx, 2) : -1;
  define_value(ctx, 0, emit1(ctx, OpCode::Conv2d, {x, w, b}, a, ctx.output(0)));
}

namespace {
// A 2-D transpose of any element size.
HostTensor transpose2d(const HostTensor& t) {
  HostTensor r;
  r.dtype = t.dtype;
  r.dims = {t.dims[1], t.dims[0]};
  const size_t es = static_cast<size_t>(bits_of(t.dtype) / 8);
  r.bytes.resize(t.bytes.size());
  const size_t rows = static_cast<size_t>(t.dims[0]), cols = static_cast<size_t>(t.dims[1]);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) std::memcpy(&r.bytes[(j * rows + i) * es], &t.bytes[(i * cols + j) * es], es);
  }
  return r;
}

HostTensor scaled_f32(const HostTensor& t, double s) {
  HostTensor r = t;
  for (size_t i = 0; i < t.numel(); ++i) {
    float v;
    std::memcpy(&v, t.bytes.data() + i * 4, 4);
    v = static_cast<float>(static_cast<double>(v) * s);
    std::memcpy(r.bytes.data() + i * 4, &v, 4);
  }
  return r;
}

HostTensor f32_scalar(float v) { return HostTensor::from_f32({}, {v}); }
}  // namespace

void Importer::op_gemm(NodeContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0f), beta = ctx.attr_float("beta", 1.0f);
  const bool trans_a = ctx.attr_int("transA", 0) != 0, trans_b = ctx.attr_int("transB", 0) != 0;
  if (rank_of(ctx, 0) != 2 || rank_of(ctx, 1) != 2) ctx.fail("A and B must be 2-D");
  int a = value_of(ctx, 0);
  if (trans_a) {
    OpAttrs p;
    p.count = 2;
    p.perm[0] = 1;
    p.perm[1] = 0;
    a = emit1(ctx, OpCode::Transpose, {a}, p, ctx.output(0) + "/a_t", "transpose_a");
  }
  const HostTensor* bc = constant_of(ctx, 1);
  int y = -1;
  bool bias_done = !ctx.has_input(2) || beta == 0.0;
  if (bc != nullptr) {
    // Linear weights are [N, K]: B [K, N] is transposed at export (transB=1 already is [N, K]).
    HostTensor w = trans_b ? *bc : transpose2d(*bc);
    if (alpha != 1.0) {
      if (w.dtype != ScalarType::F32) ctx.fail("alpha != 1 with a " + std::string(to_string(w.dtype)) + " weight is not supported");
      w = scaled_f32(w, alpha);
    }
    const int64_t n = w.dims[0];
    int bias = -1;
    if (!bias_done) {
      const HostTensor* cc = constant_of(ctx, 2);
      if (cc != nullptr && cc->dtype == ScalarType::F32 && (cc->numel() == static_cast<uint64_t>(n) || cc->numel() == 1)) {
        const std::vector<int64_t>& cd = cc->dims;
        const bool row = cd.empty() || cd.back() == n || cc->numel() == 1;
        if (row && (cd.size() < 2 || cd[0] == 1)) {
          std::vector<float> b(static_cast<size_t>(n));
          for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(read_float(*cc, cc->numel() == 1 ? 0 : i) * beta);
          bias = add_constant(ctx.name() + ".bias", HostTensor::from_f32({n}, b));
          bias_done = true;
        }
      }
    }
    OpAttrs la;
    la.activation_quant = ActivationQuant::None;
    const int wid = add_constant(trans_b && alpha == 1.0 ? ctx.input(1) : ctx.input(1) + ".T", std::move(w));
    y = emit1(ctx, OpCode::Linear, {a, wid, bias}, la, bias_done ? ctx.output(0) : ctx.output(0) + "/linear",
              bias_done ? "" : "linear");
  } else {
    int b = value_of(ctx, 1);
    if (trans_b) {
      OpAttrs p;
      p.count = 2;
      p.perm[0] = 1;
      p.perm[1] = 0;
      b = emit1(ctx, OpCode::Transpose, {b}, p, ctx.output(0) + "/b_t", "transpose_b");
    }
    y = emit1(ctx, OpCode::MatMul, {a, b}, OpAttrs{}, ctx.output(0) + "/matmul", "matmul");
    if (alpha != 1.0) {
      y = emit1(ctx, OpCode::Mul, {y, add_constant(ctx.name() + ".alpha", f32_scalar(static_cast<float>(alpha)))}, OpAttrs{},
                ctx.output(0) + "/alpha", "alpha");
    }
  }
  if (!bias_done) {
    int c = value_of(ctx, 2);
    if (beta != 1.0) {
      c = emit1(ctx, OpCode::Mul, {c, add_constant(ctx.name() + ".beta", f32_scalar(static_cast<float>(beta)))}, OpAttrs{},
                ctx.output(0) + "/beta_c", "beta");
    }
    y = emit1(ctx, OpCode::Add, {y, c}, OpAttrs{}, ctx.output(0), "add_c");
  }
  define_value(ctx, 0, y);
}

void Importer::op_matmul(NodeContext& ctx) {
  const HostTensor* bc = constant_of(ctx, 1);
  const size_t a_rank = rank_of(ctx, 0);
  if (bc != nullptr && bc->dims.size() == 2 && a_rank >= 1 && constant_of(ctx, 0) == nullptr) {
    OpAttrs la;
    la.activation_quant = ActivationQuant::None;
    const int wid = add_constant(ctx.input(1) + ".T", transpose2d(*bc));
    define_value(ctx, 0, emit1(ctx, OpCode::Linear, {value_of(ctx, 0), wid, -1}, la, ctx.output(0)));
    return;
  }
  if (a_rank < 2 || rank_of(ctx, 1) < 2) {
    ctx.fail("1-D operands are supported only as x @ W with a constant 2-D W (ranks " + std::to_string(a_rank) + " and " +
             std::to_string(rank_of(ctx, 1)) + ")");
  }
  define_value(ctx, 0, emit1(ctx, OpCode::MatMul, {value_of(ctx, 0), value_of(ctx, 1)}, OpAttrs{}, ctx.output(0)));
}

// Add(linear_without_bias(x), b) with a constant [N] b and one reader: b becomes the bias.
bool Importer::try_fuse_bias(NodeContext& ctx) {
  for (size_t side = 0; side < 2; ++side) {
    Entry& e = entry(ctx, side);
    if (e.value < 0 || e.constant || e.known || value(e.value).is_constant()) continue;
    const int producer = value(e.value).producer;
    if (producer < 0) continue;
    Node& node = graph_.nodes[static_cast<size_t>(producer)];
    if (node.op != OpCode::Linear || node.inputs.size() < 3 || node.inputs[2] >= 0) continue;
    if (value_readers(e.value) != 1) continue;
    const HostTensor* b = constant_of(ctx, 1 - side);
    const Value& w = value(node.inputs[1]);
    if (b == nullptr || b->dtype != value(e.value).dtype || b->numel() != static_cast<uint64_t>(w.dims[0].max)) continue;
    bool row = !b->dims.empty() && b->dims.back() == w.dims[0].max;
    for (size_t i = 0; row && i + 1 < b->dims.size(); ++i) row = b->dims[i] == 1;
    if (!row || b->dims.size() > value(e.value).dims.size()) continue;
    HostTensor bias = *b;
    bias.dims = {w.dims[0].max};
    node.inputs[2] = add_constant(ctx.input(1 - side), std::move(bias));
    define_value(ctx, 0, e.value);
    return true;
  }
  return false;
}

void Importer::op_binary(NodeContext& ctx) {
  const std::string& op = ctx.op_type();
  if (op == "Add" && try_fuse_bias(ctx)) return;
  const OpCode code = op == "Add" ? OpCode::Add : op == "Sub" ? OpCode::Sub : op == "Mul" ? OpCode::Mul : OpCode::Div;
  define_value(ctx, 0, emit1(ctx, code, {value_of(ctx, 0), value_of(ctx, 1)}, OpAttrs{}, ctx.output(0)));
}

void Importer::op_pow(NodeContext& ctx) {
  const HostTensor* y = constant_of(ctx, 1);
  if (y != nullptr && y->numel() == 1 && rank_of(ctx, 1) <= rank_of(ctx, 0)) {
    const double e = read_float(*y, 0);
    const int x = value_of(ctx, 0);
    if (e == 1.0) {
      define_value(ctx, 0, x);
      return;
    }
    if (e == 2.0) {
      define_value(ctx, 0, emit1(ctx, OpCode::Mul, {x, x}, OpAttrs{}, ctx.output(0)));
      return;
    }
    if (e == 0.5) {
      define_value(ctx, 0, emit1(ctx, OpCode::Sqrt, {x}, OpAttrs{}, ctx.output(0)));
      return;
    }
  }
  define_value(ctx, 0, emit1(ctx, OpCode::Pow, {value_of(ctx, 0), value_of(ctx, 1)}, OpAttrs{}, ctx.output(0)));
}

void Importer::op_unary(NodeContext& ctx) {
  static const std::map<std::string, OpCode> kOps = {
      {"Relu", OpCode::Relu}, {"Sigmoid", OpCode::Sigmoid}, {"Tanh", OpCode::Tanh}, {"Erf", OpCode::Erf},
      {"Sqrt", OpCode::Sqrt}, {"Exp", OpCode::Exp},         {"Neg", OpCode::Neg},   {"HardSwish", OpCode::HardSwish}};
  define_value(ctx, 0, emit1(ctx, kOps.at(ctx.op_type()), {value_of(ctx, 0)}, OpAttrs{}, ctx.output(0)));
}

void Importer::op_gelu(NodeContext& ctx) {
  const std::string approx = ctx.attr_string("approximate", "none");
  OpAttrs a;
  if (approx == "none") a.gelu_approx = GeluApprox::None;
  else if (approx == "tanh") a.gelu_approx = GeluApprox::Tanh;
  else ctx.fail("attribute 'approximate' = '" + approx + "' is not supported");
  define_value(ctx, 0, emit1(ctx, OpCode::Gelu, {value_of(ctx, 0)}, a, ctx.output(0)));
}

void Importer::op_clip(NodeContext& ctx) {
  if (dtype_of(ctx, 0) != ScalarType::F32) ctx.fail(std::string("input dtype ") + to_string(dtype_of(ctx, 0)) + " is not supported (f32 only)");
  const double inf = std::numeric_limits<double>::infinity();
  const double lo = scalar_of(ctx, 1, -inf, "min"), hi = scalar_of(ctx, 2, inf, "max");
  const int x = value_of(ctx, 0);
  if (lo == 0.0 && hi == inf) {
    define_value(ctx, 0, emit1(ctx, OpCode::Relu, {x}, OpAttrs{}, ctx.output(0)));
    return;
  }
  OpAttrs a;
  a.clip_min = static_cast<float>(lo);
  a.clip_max = static_cast<float>(hi);
  define_value(ctx, 0, emit1(ctx, OpCode::Clip, {x}, a, ctx.output(0)));
}

void Importer::op_hard_sigmoid(NodeContext& ctx) {
  OpAttrs a;
  a.alpha = ctx.attr_float("alpha", 0.2f);
  a.beta = ctx.attr_float("beta", 0.5f);
  define_value(ctx, 0, emit1(ctx, OpCode::HardSigmoid, {value_of(ctx, 0)}, a, ctx.output(0)));
}

void Importer::op_softmax(NodeContext& ctx) {
  const size_t rank = rank_of(ctx, 0);
  const int64_t def = ctx.opset() >= 13 ? -1 : 1;
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", def), rank);
  if (ctx.opset() < 13 && static_cast<size_t>(axis) != rank - 1) {
    ctx.fail("before opset 13, Softmax flattens the input to 2-D at 'axis' (" + std::to_string(axis) +
             "); only the last axis is supported (re-export with opset >= 13)");
  }
  OpAttrs a;
  a.axis = axis;
  define_value(ctx, 0, emit1(ctx, OpCode::Softmax, {value_of(ctx, 0)}, a, ctx.output(0)));
}

void Importer::op_pool(NodeContext& ctx) {
  const bool is_max = ctx.op_type() == "MaxPool";
  const std::vector<SymInt> x_dims = dims_of(ctx, 0);
  if (x_dims.size() != 4) ctx.fail("only 2-D pooling (rank-4 input) is supported, got rank " + std::to_string(x_dims.size()));
  OpAttrs a;
  std::vector<int64_t> ks;
  if (!ctx.attr_ints("kernel_shape", &ks)) ctx.fail("attribute 'kernel_shape' is required");
  if (ks.size() != 2) ctx.fail("attribute 'kernel_shape' has " + std::to_string(ks.size()) + " values; only 2-D is supported");
  for (int i = 0; i < 2; ++i) {
    if (ks[static_cast<size_t>(i)] < 1 || ks[static_cast<size_t>(i)] > INT32_MAX) ctx.fail("attribute 'kernel_shape' must be positive");
    a.kernel[i] = static_cast<int32_t>(ks[static_cast<size_t>(i)]);
  }
  a.stride[0] = a.stride[1] = 1;
  read_pair(ctx, "strides", a.stride);
  read_pair(ctx, "dilations", a.dilation);
  a.ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
  if (is_max) {
    if (ctx.attr_int("storage_order", 0) != 0) ctx.fail("attribute 'storage_order' = 1 is not supported");
    if (ctx.has_output(1) && (use_count(ctx.output(1)) > 0 || is_graph_output(ctx.output(1)))) {
      ctx.fail("output 1 (Indices '" + ctx.output(1) + "') is not supported");
    }
  } else {
    a.count_include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  }
  const int64_t kernel[2] = {a.kernel[0], a.kernel[1]};
  conv_like_padding(ctx, x_dims, kernel, a.stride, a.dilation, a.padding, a.ceil_mode);
  define_value(ctx, 0, emit1(ctx, is_max ? OpCode::MaxPool2d : OpCode::AvgPool2d, {value_of(ctx, 0)}, a, ctx.output(0)));
}

void Importer::op_global_average_pool(NodeContext& ctx) {
  if (rank_of(ctx, 0) != 4) ctx.fail("only rank-4 (NCHW) input is supported, got rank " + std::to_string(rank_of(ctx, 0)));
  define_value(ctx, 0, emit1(ctx, OpCode::GlobalAvgPool2d, {value_of(ctx, 0)}, OpAttrs{}, ctx.output(0)));
}

void Importer::op_batch_norm(NodeContext& ctx) {
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  ctx.ignore_attr("momentum");
  if (ctx.attr_int("training_mode", 0) != 0) ctx.fail("attribute 'training_mode' = 1 is not supported (export in eval mode)");
  if (ctx.attr_int("spatial", 1) != 1) ctx.fail("attribute 'spatial' = 0 is not supported");
  for (size_t o = 1; o < ctx.output_count(); ++o) {
    if (ctx.has_output(o) && (use_count(ctx.output(o)) > 0 || is_graph_output(ctx.output(o)))) {
      ctx.fail("output " + std::to_string(o) + " ('" + ctx.output(o) + "', training statistics) is not supported");
    }
  }
  if (rank_of(ctx, 0) < 2) ctx.fail("input must have rank >= 2");
  // Fold into the producing conv2d / linear when this is its only reader.
  Entry& x = entry(ctx, 0);
  BatchNormParams params;
  params.epsilon = eps;
  bool constant_params = true;
  std::vector<double>* dst[4] = {&params.scale, &params.bias, &params.mean, &params.var};
  for (size_t i = 1; i <= 4; ++i) {
    const HostTensor* c = constant_of(ctx, i);
    if (c == nullptr || c->dims.size() != 1) {
      constant_params = false;
      break;
    }
    for (size_t j = 0; j < c->numel(); ++j) dst[i - 1]->push_back(read_float(*c, j));
  }
  if (constant_params && x.value >= 0 && !x.constant && !x.known && !value(x.value).is_constant() &&
      value_readers(x.value) == 1) {
    const int producer = value(x.value).producer;
    if (producer >= 0 && fold_batch_norm_into(graph_, producer, params)) {
      const Node& p = graph_.nodes[static_cast<size_t>(producer)];
      for (size_t i = 1; i < p.inputs.size(); ++i) {
        if (p.inputs[i] >= 0) inference_->add_source(p.inputs[i]);
      }
      ++stats_.folded_batch_norms;
      define_value(ctx, 0, x.value);
      return;
    }
  }
  OpAttrs a;
  a.axis = 1;
  a.epsilon = static_cast<float>(eps);
  std::vector<int> ins = {value_of(ctx, 0)};
  for (size_t i = 1; i <= 4; ++i) {
    const HostTensor* c = constant_of(ctx, i);
    if (c != nullptr && c->dtype != ScalarType::F32 && c->dtype != ScalarType::F64) {
      ctx.fail(std::string("parameter dtype ") + to_string(c->dtype) + " is not supported (f32 only)");
    }
    ins.push_back(value_of(ctx, i));
  }
  define_value(ctx, 0, emit1(ctx, OpCode::BatchNorm, ins, a, ctx.output(0)));
}

void Importer::op_layer_norm(NodeContext& ctx) {
  const size_t rank = rank_of(ctx, 0);
  OpAttrs a;
  a.axis = normalize_axis(ctx, ctx.attr_int("axis", -1), rank);
  a.epsilon = ctx.attr_float("epsilon", 1e-5f);
  if (ctx.attr_int("stash_type", 1) != 1) ctx.fail("attribute 'stash_type' other than 1 (float) is not supported");
  for (size_t o = 1; o < ctx.output_count(); ++o) {
    if (ctx.has_output(o) && (use_count(ctx.output(o)) > 0 || is_graph_output(ctx.output(o)))) {
      ctx.fail("output " + std::to_string(o) + " ('" + ctx.output(o) + "', Mean/InvStdDev) is not supported");
    }
  }
  const int x = value_of(ctx, 0), scale = value_of(ctx, 1);
  const int bias = ctx.has_input(2) ? value_of(ctx, 2) : -1;
  define_value(ctx, 0, emit1(ctx, OpCode::LayerNorm, {x, scale, bias}, a, ctx.output(0)));
}

void Importer::op_flatten(NodeContext& ctx) {
  const std::vector<SymInt> dims = dims_of(ctx, 0);
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < -rank || axis > rank) ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  SymInt left = SymInt::constant(1), right = SymInt::constant(1);
  for (int64_t i = 0; i < rank; ++i) {
    SymInt& side = i < axis ? left : right;
    side = sym_mul(side, dims[static_cast<size_t>(i)]);
  }
  define_value(ctx, 0, emit_reshape(ctx, value_of(ctx, 0), {left, right}, ctx.output(0)));
}

void Importer::op_reshape(NodeContext& ctx) {
  const Known* shape = known_of(ctx, 1);
  if (shape == nullptr) {
    ctx.fail("the target shape (input '" + ctx.input(1) + "') is computed at run time from tensor data; only constants and "
             "Shape-derived values fold at export");
  }
  const bool allowzero = ctx.attr_int("allowzero", 0) != 0;
  const std::vector<SymInt> in = dims_of(ctx, 0);
  std::vector<SymInt> target = shape->elems;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].is_constant() && target[i].c == 0 && !allowzero) {
      if (i >= in.size()) ctx.fail("target shape has 0 (copy) at dim " + std::to_string(i) + " beyond the input's rank");
      target[i] = in[i];
    }
  }
  // A dim that equals the whole input's element count over the other dims is better written -1.
  define_value(ctx, 0, emit_reshape(ctx, value_of(ctx, 0), target, ctx.output(0)));
}

void Importer::op_squeeze(NodeContext& ctx) {
  const std::vector<SymInt> in = dims_of(ctx, 0);
  const std::vector<int64_t> axes = squeeze_axes(ctx, in.size(), false, in.size());
  std::vector<SymInt> out;
  for (size_t i = 0; i < in.size(); ++i) {
    const bool listed = std::count(axes.begin(), axes.end(), static_cast<int64_t>(i)) > 0;
    if (axes.empty()) {
      if (!in[i].is_constant()) {
        ctx.fail("Squeeze without axes on a run-time dim (" + format_sym(in[i], graph_) + " at axis " + std::to_string(i) +
                 ") is ambiguous; give axes");
      }
      if (in[i].c == 1) continue;
    } else if (listed) {
      if (!in[i].is_constant() || in[i].c != 1) {
        ctx.fail("squeezes axis " + std::to_string(i) + " of size " + format_sym(in[i], graph_) + " (must be 1)");
      }
      continue;
    }
    out.push_back(in[i]);
  }
  define_value(ctx, 0, emit_reshape(ctx, value_of(ctx, 0), out, ctx.output(0)));
}

void Importer::op_unsqueeze(NodeContext& ctx) {
  const std::vector<SymInt> in = dims_of(ctx, 0);
  size_t n_axes = 0;
  if (ctx.opset() >= 13) {
    if (ctx.has_input(1)) n_axes = ints_of(ctx, 1, "axes").size();
  } else {
    std::vector<int64_t> tmp;
    if (ctx.has_attr("axes")) {
      ctx.attr_ints("axes", &tmp);
      n_axes = tmp.size();
    }
  }
  const std::vector<int64_t> axes = squeeze_axes(ctx, in.size(), true, in.size() + n_axes);
  std::vector<SymInt> out;
  size_t src = 0;
  for (size_t i = 0; i < in.size() + axes.size(); ++i) {
    out.push_back(std::count(axes.begin(), axes.end(), static_cast<int64_t>(i)) ? SymInt::constant(1) : in[src++]);
  }
  define_value(ctx, 0, emit_reshape(ctx, value_of(ctx, 0), out, ctx.output(0)));
}

void Importer::op_transpose(NodeContext& ctx) {
  const size_t rank = rank_of(ctx, 0);
  std::vector<int64_t> perm;
  if (!ctx.attr_ints("perm", &perm)) {
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  if (perm.size() != rank) ctx.fail("attribute 'perm' has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(rank));
  OpAttrs a;
  a.count = static_cast<uint8_t>(rank);
  bool identity = true;
  for (size_t i = 0; i < rank; ++i) {
    a.perm[i] = normalize_axis(ctx, perm[i], rank, "perm entry");
    identity = identity && a.perm[i] == static_cast<int>(i);
  }
  const int x = value_of(ctx, 0);
  define_value(ctx, 0, identity ? x : emit1(ctx, OpCode::Transpose, {x}, a, ctx.output(0)));
}

void Importer::op_concat(NodeContext& ctx) {
  const size_t rank = rank_of(ctx, 0);
  OpAttrs a;
  a.axis = normalize_axis(ctx, ctx.attr_int("axis", 0), rank);
  std::vector<int> ins;
  for (size_t i = 0; i < ctx.input_count(); ++i) {
    if (!ctx.has_input(i)) continue;
    // Empty inputs (a dim of 0 on the axis) contribute nothing.
    const std::vector<SymInt> d = dims_of(ctx, i);
    if (d.size() == rank && d[static_cast<size_t>(a.axis)].is_constant() && d[static_cast<size_t>(a.axis)].c == 0) continue;
    ins.push_back(value_of(ctx, i));
  }
  if (ins.empty()) ctx.fail("every input is empty");
  if (ins.size() == 1) {
    define_value(ctx, 0, ins[0]);
    return;
  }
  // Concat takes at most kMaxKernelArgs - 1 inputs: chain.
  const size_t max_in = static_cast<size_t>(kMaxKernelArgs - 1);
  int part = 0;
  while (ins.size() > max_in) {
    std::vector<int> chunk(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(max_in));
    const int joined = emit1(ctx, OpCode::Concat, chunk, a, ctx.output(0) + "/part" + std::to_string(part), "part" + std::to_string(part));
    ++part;
    ins.erase(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(max_in));
    ins.insert(ins.begin(), joined);
  }
  define_value(ctx, 0, emit1(ctx, OpCode::Concat, ins, a, ctx.output(0)));
}

void Importer::op_slice(NodeContext& ctx) {
  const std::vector<SymInt> in = dims_of(ctx, 0);
  auto sym_list = [&](size_t i, const char* what) {
    const Known* k = known_of(ctx, i);
    if (k == nullptr) ctx.fail(std::string(what) + " (input '" + ctx.input(i) + "') must be known at export");
    return k->elems;
  };
  const std::vector<SymInt> starts = sym_list(1, "starts"), ends = sym_list(2, "ends");
  std::vector<int64_t> axes, steps;
  if (ctx.has_input(3)) axes = ints_of(ctx, 3, "axes");
  else for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (ctx.has_input(4)) steps = ints_of(ctx, 4, "steps");
  else steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size() ||
      starts.size() > static_cast<size_t>(kMaxRank)) {
    ctx.fail("starts/ends/axes/steps differ in length");
  }
  OpAttrs a;
  a.count = static_cast<uint8_t>(starts.size());
  bool noop = true;
  for (size_t j = 0; j < starts.size(); ++j) {
    const int ax = normalize_axis(ctx, axes[j], in.size());
    a.axes[j] = ax;
    a.steps[j] = steps[j];
    if (steps[j] == 0) ctx.fail("step 0 on axis " + std::to_string(ax));
    const SymInt& dim = in[static_cast<size_t>(ax)];
    auto resolve = [&](const SymInt& s, bool is_end) -> int64_t {
      if (s.is_constant()) return s.c;
      // An end (or start of a reversed slice) equal to the whole run-time dim.
      if (s.same_as(dim)) return INT64_MAX;  // clamped to the dim (or dim - 1 for negative steps)
      ctx.fail(std::string(is_end ? "ends" : "starts") + "[" + std::to_string(j) + "] = " + format_sym(s, graph_) +
               " depends on run-time sizes other than the sliced dim (" + format_sym(dim, graph_) + ")");
    };
    a.starts[j] = resolve(starts[j], false);
    a.ends[j] = resolve(ends[j], true);
    if (!(steps[j] == 1 && a.starts[j] == 0 && (a.ends[j] == INT64_MAX || (dim.is_constant() && a.ends[j] >= dim.c)))) noop = false;
  }
  const int x = value_of(ctx, 0);
  define_value(ctx, 0, noop ? x : emit1(ctx, OpCode::Slice, {x}, a, ctx.output(0)));
}

void Importer::op_split(NodeContext& ctx) {
  const std::vector<SymInt> in = dims_of(ctx, 0);
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", 0), in.size());
  const SymInt& dim = in[static_cast<size_t>(axis)];
  if (!dim.is_constant()) ctx.fail("splits a run-time dim (" + format_sym(dim, graph_) + ")");
  std::vector<int64_t> sizes;
  if (ctx.opset() >= 13) {
    if (ctx.has_input(1)) sizes = ints_of(ctx, 1, "split");
  } else {
    ctx.attr_ints("split", &sizes);
  }
  const int64_t outputs = static_cast<int64_t>(ctx.output_count());
  const int64_t num_outputs = ctx.attr_int("num_outputs", outputs);
  if (sizes.empty()) {
    if (num_outputs != outputs || outputs < 1) ctx.fail("num_outputs differs from the output count");
    const int64_t chunk = (dim.c + outputs - 1) / outputs;  // opset 18: the last chunk may be smaller
    int64_t left = dim.c;
    for (int64_t i = 0; i < outputs; ++i) {
      sizes.push_back(std::min(chunk, left));
      left -= sizes.back();
    }
  }
  if (static_cast<int64_t>(sizes.size()) != outputs) ctx.fail("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(outputs) + " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != dim.c) ctx.fail("split sizes sum to " + std::to_string(total) + ", the dim is " + std::to_string(dim.c));
  const Known* k = known_of(ctx, 0);
  int64_t start = 0;
  for (size_t o = 0; o < sizes.size(); ++o) {
    if (k != nullptr) {
      // A shape value: slice it at export.
      Known r = *k;
      const auto strides = known_ops::strides_of(k->dims);
      r.dims[static_cast<size_t>(axis)] = sizes[o];
      r.elems.clear();
      const size_t n = product(r.dims);
      for (size_t flat = 0; flat < n; ++flat) {
        size_t rem = flat, src = 0;
        for (size_t d = r.dims.size(); d-- > 0;) {
          const size_t c = rem % static_cast<size_t>(r.dims[d]);
          rem /= static_cast<size_t>(r.dims[d]);
          src += (c + (static_cast<int>(d) == axis ? static_cast<size_t>(start) : 0)) * strides[d];
        }
        r.elems.push_back(k->elems[src]);
      }
      define_known(ctx, o, std::move(r));
    } else if (ctx.has_output(o)) {
      OpAttrs a;
      a.count = 1;
      a.axes[0] = axis;
      a.starts[0] = start;
      a.ends[0] = start + sizes[o];
      a.steps[0] = 1;
      define_value(ctx, o, emit1(ctx, OpCode::Slice, {value_of(ctx, 0)}, a, ctx.output(o), "split" + std::to_string(o)));
    }
    start += sizes[o];
  }
}

void Importer::op_gather(NodeContext& ctx) {
  OpAttrs a;
  a.axis = normalize_axis(ctx, ctx.attr_int("axis", 0), rank_of(ctx, 0));
  const int data = value_of(ctx, 0), indices = value_of(ctx, 1);
  define_value(ctx, 0, emit1(ctx, OpCode::Gather, {data, indices}, a, ctx.output(0)));
}

void Importer::op_where(NodeContext& ctx) {
  define_value(ctx, 0, emit1(ctx, OpCode::Where, {value_of(ctx, 0), value_of(ctx, 1), value_of(ctx, 2)}, OpAttrs{}, ctx.output(0)));
}

void Importer::op_equal(NodeContext& ctx) {
  define_value(ctx, 0, emit1(ctx, OpCode::Equal, {value_of(ctx, 0), value_of(ctx, 1)}, OpAttrs{}, ctx.output(0)));
}

void Importer::op_cast(NodeContext& ctx) {
  const int64_t to = ctx.attr_int("to", 0);
  if (ctx.has_attr("saturate") && ctx.attr_int("saturate", 1) != 1) ctx.fail("attribute 'saturate' = 0 is not supported");
  ScalarType t = map_onnx_dtype(static_cast<int32_t>(to), ctx.where() + ": attribute 'to'");
  if (t == ScalarType::F64) {
    if (constant_of(ctx, 0) == nullptr) ctx.fail("casting a run-time tensor to DOUBLE is not supported");
    t = ScalarType::F32;  // constants: DOUBLE is stored as f32
  }
  const int x = value_of(ctx, 0);
  if (value(x).dtype == t) {
    define_value(ctx, 0, x);
    return;
  }
  OpAttrs a;
  a.cast_to = t;
  define_value(ctx, 0, emit1(ctx, OpCode::Cast, {x}, a, ctx.output(0)));
}

void Importer::op_expand(NodeContext& ctx) {
  const Known* shape = known_of(ctx, 1);
  if (shape == nullptr) ctx.fail("the target shape (input '" + ctx.input(1) + "') must be known at export");
  const std::vector<SymInt> in = dims_of(ctx, 0);
  // Bidirectional broadcasting: the output is broadcast(in, shape).
  const size_t r = std::max(in.size(), shape->elems.size());
  if (r > static_cast<size_t>(kMaxRank)) ctx.fail("rank > 8");
  std::vector<SymInt> out(r);
  for (size_t i = 0; i < r; ++i) {
    const SymInt a = i < r - in.size() ? SymInt::constant(1) : in[i - (r - in.size())];
    const SymInt b = i < r - shape->elems.size() ? SymInt::constant(1) : shape->elems[i - (r - shape->elems.size())];
    if (b.is_constant() && b.c == 1) out[i] = a;
    else if (a.is_constant() && a.c == 1) out[i] = b;
    else if (a.same_as(b)) out[i] = a;
    else ctx.fail("cannot broadcast " + fmt(in) + " to " + fmt(shape->elems));
  }
  OpAttrs at;
  at.count = static_cast<uint8_t>(r);
  bool same = in.size() == r;
  for (size_t i = 0; i < r; ++i) {
    if (out[i].is_constant()) {
      at.shape[i] = out[i].c;
    } else if (out[i].is_symbol() && out[i].symbol_id() <= declared_symbols_) {
      at.shape[i] = graph_.symbols[out[i].symbol_id() - 1u].max;
      at.shape_sym[i] = out[i].symbol_id();
    } else {
      ctx.fail("expands to " + fmt(out) + ": dim " + std::to_string(i) + " is neither static nor an input symbol");
    }
    same = same && out[i].same_as(in[i]);
  }
  const int x = value_of(ctx, 0);
  define_value(ctx, 0, same ? x : emit1(ctx, OpCode::Expand, {x}, at, ctx.output(0)));
}

void Importer::op_pad(NodeContext& ctx) {
  const size_t rank = rank_of(ctx, 0);
  const std::string mode = ctx.attr_string("mode", "constant");
  OpAttrs a;
  if (mode == "constant") a.pad_mode = PadMode::Constant;
  else if (mode == "reflect") a.pad_mode = PadMode::Reflect;
  else if (mode == "edge") a.pad_mode = PadMode::Edge;
  else ctx.fail("attribute 'mode' = '" + mode + "' is not supported");
  const std::vector<int64_t> pads = ints_of(ctx, 1, "pads");
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    axes = ints_of(ctx, 3, "axes");
  } else {
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (pads.size() != 2 * axes.size()) ctx.fail("pads has " + std::to_string(pads.size()) + " values for " + std::to_string(axes.size()) + " axes");
  a.count = static_cast<uint8_t>(rank);
  for (size_t j = 0; j < axes.size(); ++j) {
    const int ax = normalize_axis(ctx, axes[j], rank);
    a.pads[ax] = pads[j];
    a.pads[rank + static_cast<size_t>(ax)] = pads[axes.size() + j];
  }
  a.pad_value = static_cast<float>(scalar_of(ctx, 2, 0.0, "constant_value"));
  const int x = value_of(ctx, 0);
  const bool noop = std::all_of(a.pads, a.pads + 2 * rank, [](int64_t p) { return p == 0; });
  define_value(ctx, 0, noop ? x : emit1(ctx, OpCode::Pad, {x}, a, ctx.output(0)));
}

void Importer::op_reduce(NodeContext& ctx) {
  const bool mean = ctx.op_type() == "ReduceMean";
  const size_t rank = rank_of(ctx, 0);
  const int64_t input_axes_from = mean ? 18 : 13;
  std::vector<int64_t> axes;
  if (ctx.opset() >= input_axes_from) {
    if (ctx.has_input(1)) axes = ints_of(ctx, 1, "axes");
  } else {
    ctx.attr_ints("axes", &axes);
  }
  OpAttrs a;
  a.keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool noop_empty = ctx.attr_int("noop_with_empty_axes", 0) != 0;
  if (axes.empty() && noop_empty) {
    define_alias(ctx, 0, 0);
    return;
  }
  if (axes.size() > static_cast<size_t>(kMaxRank)) ctx.fail("too many axes");
  std::sort(axes.begin(), axes.end());
  for (int64_t& ax : axes) ax = normalize_axis(ctx, ax, rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) ctx.fail("repeats an axis");
  a.count = static_cast<uint8_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) a.axes[i] = static_cast<int32_t>(axes[i]);
  define_value(ctx, 0, emit1(ctx, mean ? OpCode::ReduceMean : OpCode::ReduceSum, {value_of(ctx, 0)}, a, ctx.output(0)));
}

void Importer::op_constant_of_shape(NodeContext& ctx) {
  const Known* shape = known_of(ctx, 0);
  if (shape == nullptr) ctx.fail("the shape input must be known at export");
  std::vector<int64_t> dims;
  for (const SymInt& s : shape->elems) {
    if (!s.is_constant()) {
      ctx.fail("builds a tensor of run-time shape " + fmt(shape->elems) + "; only static shapes are supported");
    }
    if (s.c < 0) ctx.fail("negative dim in shape");
    dims.push_back(s.c);
  }
  HostTensor fill = HostTensor::from_f32({}, {0.0f});
  if (const onnx::TensorProto* v = ctx.attr_tensor("value")) fill = read_tensor_proto(*v, read_options_, ctx.where() + ": attribute 'value'");
  if (fill.numel() != 1) ctx.fail("attribute 'value' must hold one element");
  const uint64_t n = product(dims);
  ++stats_.evaluated_at_export;
  if (is_integer_dtype(fill.dtype) && n <= kMaxKnownElements) {
    Known k;
    k.dtype = fill.dtype;
    k.dims = dims;
    k.elems.assign(n, SymInt::constant(read_int(fill, 0)));
    define_known(ctx, 0, std::move(k));
    return;
  }
  HostTensor t;
  t.dtype = fill.dtype;
  t.dims = dims;
  const size_t es = fill.bytes.size();
  t.bytes.resize(es * n);
  for (uint64_t i = 0; i < n; ++i) std::memcpy(t.bytes.data() + i * es, fill.bytes.data(), es);
  define_constant(ctx, 0, std::move(t));
}

void Importer::op_range(NodeContext& ctx) {
  const HostTensor *s = constant_of(ctx, 0), *l = constant_of(ctx, 1), *d = constant_of(ctx, 2);
  if (s == nullptr || l == nullptr || d == nullptr) {
    ctx.fail("start, limit and delta must be constants (a run-time Range is not supported)");
  }
  ++stats_.evaluated_at_export;
  if (is_integer_dtype(s->dtype)) {
    const int64_t start = read_int(*s, 0), limit = read_int(*l, 0), delta = read_int(*d, 0);
    if (delta == 0) ctx.fail("delta is 0");
    const int64_t n = std::max<int64_t>(0, (limit - start + delta + (delta > 0 ? -1 : 1)) / delta);
    if (static_cast<size_t>(n) > kMaxKnownElements) ctx.fail("more than " + std::to_string(kMaxKnownElements) + " elements");
    Known k;
    k.dtype = s->dtype;
    k.dims = {n};
    for (int64_t i = 0; i < n; ++i) k.elems.push_back(SymInt::constant(start + i * delta));
    define_known(ctx, 0, std::move(k));
    return;
  }
  const double start = read_float(*s, 0), limit = read_float(*l, 0), delta = read_float(*d, 0);
  if (delta == 0) ctx.fail("delta is 0");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(start + static_cast<double>(i) * delta));
  define_constant(ctx, 0, HostTensor::from_f32({n}, v));
}

void Importer::op_quantized(NodeContext& ctx) { ctx.fail("quantized ONNX graphs are not supported yet (QDQ)"); }

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
      {"ConstantOfShape", &Importer::op_constant_of_shape},
      {"Range", &Importer::op_range},
      {"QuantizeLinear", &Importer::op_quantized},
      {"DequantizeLinear", &Importer::op_quantized},
      {"DynamicQuantizeLinear", &Importer::op_quantized},
      {"QLinearConv", &Importer::op_quantized},
      {"QLinearMatMul", &Importer::op_quantized},
      {"MatMulInteger", &Importer::op_quantized},
      {"ConvInteger", &Importer::op_quantized},
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
  } catch (const ExportError& e) {
    const std::string msg = e.what();
    if (msg.rfind("onnx: ", 0) == 0) throw;
    throw ExportError(ctx.where() + ": " + msg);
  }
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
  inference_ = std::make_unique<ShapeInference>(graph_);
  for (size_t v = 0; v < graph_.values.size(); ++v) inference_->add_source(static_cast<int>(v));
  for (size_t i = 0; i < nodes_.size(); ++i) convert_node(nodes_[i], i);
  bind_outputs();
  remove_dead_code(graph_);
  graph_.check_structure();
  stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  OnnxImport result;
  result.graph = std::move(graph_);
  result.stats = std::move(stats_);
  return result;
}

}  // namespace

OnnxImport import_onnx_model(const onnx::ModelProto& model, const std::string& base_dir, const OnnxImportOptions& options) {
  Importer importer(model, base_dir, options);
  return importer.run();
}

OnnxImport import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const OnnxImportOptions& options) {
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX)));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    throw ExportError("onnx: the file is not a valid ONNX ModelProto (protobuf parse failed)");
  }
  return import_onnx_model(model, base_dir, options);
}

OnnxImport import_onnx_file(const std::string& path, const OnnxImportOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw ExportError("onnx: cannot open '" + path + "' (no such file)");
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw ExportError("onnx: cannot stat '" + path + "'");
  if (size >= (uint64_t{1} << 31)) {
    throw ExportError("onnx: '" + path + "' is " + std::to_string(size) + " bytes; protobuf messages are limited to 2 GiB: "
                      "save the weights as external data (onnx.save_model(model, path, save_as_external_data=True))");
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (size) in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in) throw ExportError("onnx: reading '" + path + "' failed");
  const fs::path parent = fs::path(path).parent_path();
  return import_onnx_bytes(bytes, parent.empty() ? "." : parent.string(), options);
}

std::string format_import_summary(const OnnxImportStats& s) {
  std::string out = "onnx: opset " + std::to_string(s.opset) + ", ir " + std::to_string(s.ir_version) + ", producer " +
                    (s.producer.empty() ? "?" : s.producer) + "; " + std::to_string(s.onnx_nodes) + " nodes:";
  for (const auto& [op, count] : s.onnx_ops) out += " " + op + " x" + std::to_string(count);
  out += "\n";
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "import: %d BatchNorm folded, %d Identity/Dropout removed, %d nodes evaluated at export, "
                "%d functions inlined; initializers %llu bytes (%d external); %.1f ms\n",
                s.folded_batch_norms, s.removed_identity, s.evaluated_at_export, s.inlined_functions,
                static_cast<unsigned long long>(s.initializer_bytes), s.external_tensors, s.seconds * 1e3);
  return out + buf;
}

}  // namespace ember::exporter
