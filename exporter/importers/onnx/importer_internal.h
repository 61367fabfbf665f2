// Internal to the ONNX importer: the Importer class and the pieces its handler files share.
// Split by concern: onnx_importer.cc (setup, values, emitting, driver), onnx_known.cc (export-time
// integer "shape values"), onnx_ops_nn.cc (compute ops), onnx_ops_tensor.cc (movement and shape ops).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporter/importers/onnx/onnx_importer.h"
#include "exporter/importers/onnx/sym_int.h"
#include "exporter/importers/onnx/tensor_proto.h"
#include "exporter/passes/shape_inference.h"
#include "onnx.pb.h"
#include "runtime/core/float_codecs.h"
#include "runtime/kernel/op_info.h"

namespace ember::exporter::onnx_detail {

constexpr int64_t kMinOpset = 11;
constexpr int64_t kMaxOpset = 21;
constexpr size_t kMaxKnownElements = 4096;  // larger integer constants stay tensors
constexpr int kMaxFunctionDepth = 16;
constexpr size_t kMaxFlatNodes = size_t{1} << 20;       // nodes after inlining functions
constexpr size_t kMaxInlinedBytes = size_t{256} << 20;  // node protos copied by inlining
// The largest tensor the importer builds at export from no file data (ConstantOfShape, Range): the
// size comes from the model's numbers, not from bytes it holds.
constexpr uint64_t kMaxExportTimeBytes = uint64_t{256} << 20;

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

inline bool is_integer_dtype(ScalarType t) {
  return t == ScalarType::I64 || t == ScalarType::I32 || t == ScalarType::I16 || t == ScalarType::I8 ||
         t == ScalarType::U8 || t == ScalarType::Bool;
}

// Element count of `dims`, saturating at UINT64_MAX (a hostile shape must not wrap to a small count).
inline uint64_t product(const std::vector<int64_t>& dims) {
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) n = UINT64_MAX;
  }
  for (int64_t d : dims) {
    if (d == 0) return 0;
  }
  return n;
}

inline int64_t read_int(const HostTensor& t, size_t i) {
  switch (t.dtype) {
    case ScalarType::I64: { int64_t v; std::memcpy(&v, t.bytes.data() + i * 8, 8); return v; }
    case ScalarType::I32: { int32_t v; std::memcpy(&v, t.bytes.data() + i * 4, 4); return v; }
    case ScalarType::I16: { int16_t v; std::memcpy(&v, t.bytes.data() + i * 2, 2); return v; }
    case ScalarType::I8: return static_cast<int8_t>(t.bytes[i]);
    case ScalarType::U8: case ScalarType::Bool: return t.bytes[i];
    default: throw ExportError("read_int on a non-integer tensor");
  }
}

inline double read_float(const HostTensor& t, size_t i) {
  switch (t.dtype) {
    case ScalarType::F32: { float v; std::memcpy(&v, t.bytes.data() + i * 4, 4); return v; }
    case ScalarType::F64: { double v; std::memcpy(&v, t.bytes.data() + i * 8, 8); return v; }
    case ScalarType::F16: case ScalarType::BF16: {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + i * 2, 2);
      return t.dtype == ScalarType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    default: return static_cast<double>(read_int(t, i));
  }
}

inline HostTensor known_to_tensor(const Known& k) {
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

inline const char* attr_type_name(int t) {
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

  inline static const std::string kNoName;

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
  // Names past the node's lists are "" (absent), as ONNX treats trailing optional ones: handlers
  // may ask for output(0) of a node that lists none (found by ember_fuzz_onnx).
  const std::string& input(size_t i) const { return i < input_count() ? proto_.input(static_cast<int>(i)) : kNoName; }
  size_t output_count() const { return static_cast<size_t>(proto_.output_size()); }
  bool has_output(size_t i) const { return i < output_count() && !proto_.output(static_cast<int>(i)).empty(); }
  const std::string& output(size_t i) const { return i < output_count() ? proto_.output(static_cast<int>(i)) : kNoName; }

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

// A node that failed because nodes inside it did (an If's branch): their failures are listed, the
// node itself is not (convert_or_record poisons its outputs only).
class AlreadyReported : public ExportError {
 public:
  using ExportError::ExportError;
};

// A node after function inlining, with the opset of its own domain.
struct FlatNode {
  onnx::NodeProto proto;
  int64_t opset = 0;
};

inline int normalize_axis(const NodeContext& ctx, int64_t axis, size_t rank, const char* what = "axis") {
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
    read_options_.trust_model_folder = options.trust_model_folder;
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
  void bind_input_value(const onnx::ValueInfoProto& in, const OnnxImportOptions::InputValue& iv);
  void read_initializers();
  void convert_node(const FlatNode& node, size_t index);
  // convert_node, recording a node's failure and going on with the rest (failures_, poisoned_).
  void convert_or_record(const FlatNode& node, size_t index);
  [[noreturn]] void throw_failures() const;
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
  void op_not(NodeContext& ctx);
  void op_cast(NodeContext& ctx);
  void op_expand(NodeContext& ctx);
  void op_pad(NodeContext& ctx);
  void op_reduce(NodeContext& ctx);
  void op_constant_of_shape(NodeContext& ctx);
  void op_range(NodeContext& ctx);
  void op_scatter_nd(NodeContext& ctx);
  void op_einsum(NodeContext& ctx);
  void op_quantized(NodeContext& ctx);
  void op_if(NodeContext& ctx);
  std::vector<std::string> import_branch(NodeContext& ctx, const onnx::GraphProto& branch, const std::string& which);
  void select_branches(NodeContext& ctx, const onnx::AttributeProto& then_attr, const onnx::AttributeProto& else_attr);
  void op_isnan(NodeContext& ctx);
  void op_log_softmax(NodeContext& ctx);
  void op_gather_nd(NodeContext& ctx);
  void count_subgraph_readers();
  // [issue 17: elementwise ops]
  void op_activation(NodeContext& ctx);
  void op_prelu(NodeContext& ctx);
  void op_math_unary(NodeContext& ctx);
  void op_compare(NodeContext& ctx);
  void op_logical(NodeContext& ctx);
  void op_variadic(NodeContext& ctx);

  // [issue 17: reductions and index ops] (onnx_ops_reduce.cc)
  void op_reduce_extreme(NodeContext& ctx);
  void op_reduce_composed(NodeContext& ctx);
  void op_arg(NodeContext& ctx);
  void op_topk(NodeContext& ctx);
  void op_cumsum(NodeContext& ctx);
  void op_gather_elements(NodeContext& ctx);
  void op_group_norm(NodeContext& ctx);
  void op_tile(NodeContext& ctx);
  void op_depth_space(NodeContext& ctx);
  bool reduce_attrs(NodeContext& ctx, int64_t input_axes_from, OpAttrs* a);
  int emit_expand(const NodeContext& ctx, int x, const std::vector<SymInt>& dims, const std::string& out_name,
                  const std::string& suffix);

  // [issue 17: resize, conv_transpose2d]
  void op_resize(NodeContext& ctx);
  void op_conv_transpose(NodeContext& ctx);
  void op_conv_nd(NodeContext& ctx, bool transpose);  // 1-D Conv, 1-D / 2-D ConvTranspose; refuses 3-D

  // [issue 17: lstm, gru]
  void op_rnn(NodeContext& ctx);  // LSTM and GRU (onnx_ops_rnn.cc)

  static const std::map<std::string, Handler>& handlers();

  // Shared pieces.
  std::vector<int64_t> squeeze_axes(NodeContext& ctx, size_t rank, bool unsqueeze, size_t out_rank);
  void conv_like_padding(NodeContext& ctx, const std::vector<SymInt>& in_dims, const int64_t kernel[2],
                         const int32_t stride[2], const int32_t dilation[2], int32_t padding[4], bool ceil_mode);
  bool try_fuse_bias(NodeContext& ctx);
  int einsum_reduce(NodeContext& ctx, int x, std::string* terms, const std::string& keep, const std::string& tag);
  int einsum_permute(NodeContext& ctx, int x, const std::string& from, const std::string& to, const std::string& tag);
  void define_alias(NodeContext& ctx, size_t output, size_t input);

  const onnx::ModelProto& model_;
  OnnxImportOptions options_;
  TensorReadOptions read_options_;
  OnnxImportStats stats_;
  std::map<std::string, int64_t> opsets_;  // domain ("" = default) -> version
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions_;
  std::vector<FlatNode> nodes_;
  size_t inlined_bytes_ = 0;  // ByteSizeLong of the function nodes inlined so far

  Graph graph_;
  std::unique_ptr<ShapeInference> inference_;
  // Aliases (Identity, Dropout, fused ops) share one Entry, so a constant is materialized once.
  std::unordered_map<std::string, std::shared_ptr<Entry>> env_;
  // Keep-going import (issue 17): the nodes that failed, and the names their failure left undefined
  // (their outputs, and the outputs of every node that read one, transitively).
  struct Failure {
    std::string op_type;
    std::string message;  // "onnx: <Op> node '<name>' (opset N): <reason>"
  };
  std::vector<Failure> failures_;
  std::set<std::string> poisoned_;
  size_t skipped_nodes_ = 0;
  size_t branch_nodes_ = 0;  // nodes of taken If branches (their default names' numbering)
  std::unordered_map<std::string, int> use_count_;
  std::set<std::string> graph_output_names_;
  std::set<std::string> node_names_;
  std::set<std::string> value_names_;
  size_t declared_symbols_ = 0;
};

// Index helpers over known (export-time) tensors.
namespace known_ops {

// Numpy broadcasting of known tensors.
inline bool broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out) {
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

inline size_t broadcast_index(const std::vector<int64_t>& out_dims, size_t flat, const std::vector<int64_t>& in_dims) {
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

inline std::vector<size_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<size_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * static_cast<size_t>(dims[i]);
  return s;
}

}  // namespace known_ops

}  // namespace ember::exporter::onnx_detail
