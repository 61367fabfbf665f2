// Control flow (issue 17): an If whose condition is known at export is replaced by the nodes of the
// branch it takes; one whose condition is computed at run time runs both branches and selects each
// output with where (the exporter's IR, partitioner and planner are straight-line; the program's
// JumpIfFalse would skip the untaken branch, which a later change can use). Loop is not supported.
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

}  // namespace ember::exporter::onnx_detail
