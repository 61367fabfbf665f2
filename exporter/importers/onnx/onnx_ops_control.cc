// Control flow (issue 17): an If whose condition is known at export is replaced by the nodes of the
// branch it takes; one whose condition is computed at run time runs both branches and selects each
// output with where (the exporter's IR, partitioner and planner are straight-line; the program's
// JumpIfFalse would skip the untaken branch, which a later change can use). Loop is not supported.
#include <charconv>
#include <cmath>
#include <cstring>

#include "exporter/importers/onnx/importer_internal.h"
#include "exporter/passes/weight_check.h"

namespace ember::exporter::onnx_detail {

namespace {

// Every node input in a graph attribute of `node`, and in theirs (recursively): the names an If or
// Loop body reads, counted as readers before any node is converted (folds ask for reader counts).
void count_subgraph_inputs(const onnx::NodeProto& node, std::unordered_map<std::string, int>& counts, int depth) {
  if (depth > 64) return;  // the parser's recursion limit stops far earlier
  for (const auto& a : node.attribute()) {
    std::vector<const onnx::GraphProto*> graphs;
    if (a.has_g()) graphs.push_back(&a.g());
    for (const auto& g : a.graphs()) graphs.push_back(&g);
    for (const onnx::GraphProto* g : graphs) {
      for (const auto& inner : g->node()) {
        for (const auto& in : inner.input()) {
          if (!in.empty()) ++counts[in];
        }
        count_subgraph_inputs(inner, counts, depth + 1);
      }
      for (const auto& out : g->output()) ++counts[out.name()];  // the If / Loop reads them
    }
  }
}

}  // namespace

void Importer::count_subgraph_readers() {
  for (const FlatNode& n : nodes_) count_subgraph_inputs(n.proto, use_count_, 0);
}

// The nodes of one branch, converted as the graph's own (functions inlined; a failure is listed and
// its readers skipped, as for top-level nodes); returns the names of its outputs, all defined.
std::vector<std::string> Importer::import_branch(NodeContext& ctx, const onnx::GraphProto& branch,
                                                 const std::string& which) {
  if (static_cast<size_t>(branch.output_size()) != ctx.output_count()) {
    ctx.fail(which + " has " + std::to_string(branch.output_size()) + " outputs for the node's " +
             std::to_string(ctx.output_count()));
  }
  if (branch.sparse_initializer_size() > 0) ctx.fail(which + ": sparse initializers are not supported");
  for (const auto& init : branch.initializer()) {
    if (env_.count(init.name())) ctx.fail(which + ": initializer '" + init.name() + "' shadows an outer name");
    auto t = std::make_shared<HostTensor>(read_tensor_proto(init, read_options_, ctx.where() + ": " + which +
                                                                                    " initializer '" + init.name() + "'"));
    uint64_t first = 0;
    const uint64_t numel = is_sub_byte(t->dtype) ? 0 : t->bytes.size() / std::max(1, bits_of(t->dtype) / 8);
    if (count_non_finite(t->dtype, t->bytes.data(), numel, &first, false) != 0 && !options_.allow_non_finite_weights) {
      ctx.fail(which + ": initializer '" + init.name() + "' holds NaN (pass --allow-non-finite-weights to export it)");
    }
    stats_.initializer_bytes += t->bytes.size();
    env_[init.name()] = std::make_shared<Entry>(Entry{-1, std::move(t), nullptr});
  }
  std::vector<FlatNode> flat;
  for (const auto& node : branch.node()) inline_node(node, ctx.opset(), "", 0, flat);
  const size_t failures_before = failures_.size();
  for (size_t i = 0; i < flat.size(); ++i) convert_or_record(flat[i], nodes_.size() + (++branch_nodes_));
  std::vector<std::string> outs;
  for (int o = 0; o < branch.output_size(); ++o) {
    const std::string& inner = branch.output(o).name();
    if (poisoned_.count(inner) || failures_.size() > failures_before) {
      throw AlreadyReported(ctx.where() + ": " + which + " could not be imported");
    }
    if (!env_.count(inner)) ctx.fail(which + " output '" + inner + "' is not produced by any node of the branch");
    outs.push_back(inner);
  }
  return outs;
}

// A condition computed at run time: both branches are imported and each output is
// where(cond, then, else). The branches are pure, so the selected values are exactly the taken
// branch's; the cost is running both (openWakeWord's hey_jarvis: a small verifier MLP). The two
// outputs must have the same dtype and dims; a branch that fails at run time (an input check)
// fails the run even when it is not the one taken.
void Importer::select_branches(NodeContext& ctx, const onnx::AttributeProto& then_attr,
                               const onnx::AttributeProto& else_attr) {
  const ScalarType cdt = dtype_of(ctx, 0);
  if (cdt != ScalarType::Bool) ctx.fail("the run-time condition has dtype " + std::string(to_string(cdt)) + " (expected bool)");
  uint64_t cn = 1;
  for (const SymInt& d : dims_of(ctx, 0)) cn *= d.is_constant() ? static_cast<uint64_t>(d.c) : 2;
  if (cn != 1) ctx.fail("the run-time condition must hold one element");
  const int cond = value_of(ctx, 0);
  const std::vector<std::string> t = import_branch(ctx, then_attr.g(), "then_branch");
  const std::vector<std::string> e = import_branch(ctx, else_attr.g(), "else_branch");
  for (size_t o = 0; o < ctx.output_count(); ++o) {
    if (!ctx.has_output(o)) continue;
    const int a = materialize(*env_.at(t[o]), t[o]), b = materialize(*env_.at(e[o]), e[o]);
    if (value(a).dtype != value(b).dtype || value(a).dims.size() != value(b).dims.size()) {
      ctx.fail("output " + std::to_string(o) + ": the branches give " + to_string(value(a).dtype) + " rank " +
               std::to_string(value(a).dims.size()) + " and " + to_string(value(b).dtype) + " rank " +
               std::to_string(value(b).dims.size()) + " (a run-time If needs the same dtype and dims)");
    }
    for (size_t d = 0; d < value(a).dims.size(); ++d) {
      if (value(a).dims[d].max != value(b).dims[d].max || value(a).dims[d].sym != value(b).dims[d].sym) {
        ctx.fail("output " + std::to_string(o) + ": the branches' dims differ at dim " + std::to_string(d) +
                 " (a run-time If needs the same dims)");
      }
    }
    define_value(ctx, o, emit1(ctx, OpCode::Where, {cond, a, b}, OpAttrs{}, ctx.output(o), "select"));
  }
  ++stats_.selected_ifs;
}

void Importer::op_if(NodeContext& ctx) {
  const onnx::AttributeProto* then_attr = ctx.find("then_branch");
  const onnx::AttributeProto* else_attr = ctx.find("else_branch");
  if (then_attr == nullptr || else_attr == nullptr || !then_attr->has_g() || !else_attr->has_g()) {
    ctx.fail("needs then_branch and else_branch graphs");
  }
  bool cond = false;
  const HostTensor* c = constant_of(ctx, 0);
  if (c == nullptr) {
    const Known* k = known_of(ctx, 0);
    if (k != nullptr && k->numel() == 1 && !k->elems[0].is_constant()) {
      ctx.fail("the condition '" + ctx.input(0) + "' = " + fmt(k->elems) +
               " depends on a run-time size; Ember takes an If only when its condition is known at export "
               "(give that dim a fixed size with --input-shape)");
    }
    select_branches(ctx, *then_attr, *else_attr);
    return;
  }
  if (c->numel() != 1) ctx.fail("the condition has " + std::to_string(c->numel()) + " elements (expected 1)");
  cond = c->dtype == ScalarType::Bool || is_integer_dtype(c->dtype) ? read_int(*c, 0) != 0 : read_float(*c, 0) != 0.0;
  const onnx::GraphProto& branch = cond ? then_attr->g() : else_attr->g();
  const std::vector<std::string> outs = import_branch(ctx, branch, cond ? "then_branch" : "else_branch");
  ++stats_.folded_ifs;
  for (size_t o = 0; o < ctx.output_count(); ++o) {
    if (!ctx.has_output(o)) continue;
    if (env_.count(ctx.output(o))) ctx.fail("output '" + ctx.output(o) + "' is already defined (SSA violated)");
    env_[ctx.output(o)] = env_.at(outs[o]);
  }
}

// exporter --input-value: a graph input fixed to constants at export (declare_inputs calls this).
void Importer::bind_input_value(const onnx::ValueInfoProto& in, const OnnxImportOptions::InputValue& iv) {
  const std::string what = "--input-value '" + iv.text + "'";
  if (!in.type().has_tensor_type()) throw ExportError(what + ": input '" + in.name() + "' is not a tensor");
  const auto& tt = in.type().tensor_type();
  HostTensor t;
  t.dtype = map_onnx_dtype(tt.elem_type(), "onnx: graph input '" + in.name() + "'");
  if (t.dtype == ScalarType::F64) t.dtype = ScalarType::F32;  // as DOUBLE constants are
  const size_t n = iv.values.size();
  if (tt.has_shape() && !(tt.shape().dim_size() == 1 && n == 1 && !tt.shape().dim(0).has_dim_value())) {
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0) {
        // An unknown dim takes what the values give when it is the only one (a 1-D input).
        if (tt.shape().dim_size() != 1) {
          throw ExportError(what + ": input '" + in.name() + "' has a dim that is not fixed; give it a fixed size in the model");
        }
        t.dims.push_back(static_cast<int64_t>(n));
      } else {
        t.dims.push_back(d.dim_value());
      }
    }
  } else if (tt.has_shape()) {
    t.dims.push_back(1);
  }
  if (product(t.dims) != n) {
    throw ExportError(what + ": input '" + in.name() + "' holds " + std::to_string(product(t.dims)) + " elements, " +
                      std::to_string(n) + " value(s) given");
  }
  const size_t width = static_cast<size_t>(std::max(1, bits_of(t.dtype) / 8));
  t.bytes.assign(n * width, 0);
  for (size_t i = 0; i < n; ++i) {
    const double v = iv.values[i];
    uint8_t* at = t.bytes.data() + i * width;
    auto integral = [&](double lo, double hi) {
      if (v != std::floor(v) || v < lo || v > hi) {
        throw ExportError(what + ": value " + std::to_string(i) + " does not fit input '" + in.name() + "' (" +
                          to_string(t.dtype) + ")");
      }
    };
    switch (t.dtype) {
      case ScalarType::F32: { const float f = static_cast<float>(v); std::memcpy(at, &f, 4); break; }
      case ScalarType::F16: { const uint16_t h = f32_to_f16(static_cast<float>(v)); std::memcpy(at, &h, 2); break; }
      case ScalarType::BF16: { const uint16_t h = f32_to_bf16(static_cast<float>(v)); std::memcpy(at, &h, 2); break; }
      case ScalarType::I64: { integral(-9.2e18, 9.2e18); const int64_t x = static_cast<int64_t>(v); std::memcpy(at, &x, 8); break; }
      case ScalarType::I32: { integral(INT32_MIN, INT32_MAX); const int32_t x = static_cast<int32_t>(v); std::memcpy(at, &x, 4); break; }
      case ScalarType::I16: { integral(INT16_MIN, INT16_MAX); const int16_t x = static_cast<int16_t>(v); std::memcpy(at, &x, 2); break; }
      case ScalarType::I8: { integral(INT8_MIN, INT8_MAX); *at = static_cast<uint8_t>(static_cast<int8_t>(v)); break; }
      case ScalarType::U8: { integral(0, 255); *at = static_cast<uint8_t>(v); break; }
      case ScalarType::Bool: { integral(0, 1); *at = static_cast<uint8_t>(v); break; }
      default: throw ExportError(what + ": input '" + in.name() + "' is " + to_string(t.dtype) + ", which cannot be bound");
    }
  }
  ++stats_.bound_inputs;
  env_[in.name()] = std::make_shared<Entry>(Entry{-1, std::make_shared<HostTensor>(std::move(t)), nullptr});
}

}  // namespace ember::exporter::onnx_detail

namespace ember::exporter {

OnnxImportOptions::InputValue parse_input_value(const std::string& text) {
  OnnxImportOptions::InputValue iv;
  iv.text = text;
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw ExportError("--input-value '" + text + "': expected NAME=VALUE[,VALUE...]");
  }
  iv.name = text.substr(0, eq);
  size_t start = eq + 1;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    double v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || !std::isfinite(v)) {
      throw ExportError("--input-value '" + text + "': '" + item + "' is not a finite number");
    }
    iv.values.push_back(v);
    start = comma + 1;
  }
  return iv;
}

}  // namespace ember::exporter
