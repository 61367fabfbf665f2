#include "tools/runner/input_ranges.h"

#include <vector>

#include "runtime/kernel/op.h"

namespace ember::tools {
namespace {

// Ops whose output holds (some of) the input's values unchanged: a value read through them still
// indexes what they feed.
bool passes_values(OpCode op) {
  switch (op) {
    case OpCode::Cast: case OpCode::Reshape: case OpCode::Transpose: case OpCode::Slice: case OpCode::Expand:
    case OpCode::Concat: case OpCode::Pad:
      return true;
    default:
      return false;
  }
}

std::string node_name(const fb::Instruction* ins, const fb::DebugInfo* debug) {
  if (debug == nullptr || debug->nodes() == nullptr || ins->debug_id() == 0 || ins->debug_id() > debug->nodes()->size()) {
    return "";
  }
  const fb::DebugNode* n = debug->nodes()->Get(ins->debug_id() - 1);
  return n->name() ? n->name()->str() : "";
}

}  // namespace

InputRange integer_input_range(const fb::Graph& graph, uint32_t input, const fb::DebugInfo* debug) {
  InputRange r;
  r.why = "no gather or embedding reads it: 0 or 1 (a mask or a type id)";
  if (graph.inputs() == nullptr || input >= graph.inputs()->size() || graph.instructions() == nullptr) return r;
  std::vector<bool> reached(graph.values() ? graph.values()->size() : 0, false);
  std::vector<uint32_t> frontier = {graph.inputs()->Get(input)->value()};
  if (frontier[0] >= reached.size()) return r;
  reached[frontier[0]] = true;
  int64_t bound = -1;
  // Forward over the instruction list (topological): every value reached from the input.
  for (uint32_t i = 0; i < graph.instructions()->size(); ++i) {
    const fb::Instruction* ins = graph.instructions()->Get(i);
    const fb::KernelCall* call = ins->args_as_KernelCall();
    if (call == nullptr || call->inputs() == nullptr || call->outputs() == nullptr) continue;
    const OpCode op = static_cast<OpCode>(call->op());
    for (uint32_t k = 0; k < call->inputs()->size(); ++k) {
      const int32_t v = call->inputs()->Get(k);
      if (v < 0 || static_cast<size_t>(v) >= reached.size() || !reached[static_cast<size_t>(v)]) continue;
      // The table an index selects from: gather's data along its axis, an embedding's rows.
      int64_t rows = -1;
      if ((op == OpCode::Gather || op == OpCode::GatherElements) && k == 1 && call->inputs()->size() > 0) {
        const int32_t data = call->inputs()->Get(0);
        const int axis = call->attrs_as_AxisAttrs() ? call->attrs_as_AxisAttrs()->axis() : 0;
        const fb::Tensor* t = data >= 0 ? graph.values()->Get(static_cast<uint32_t>(data)) : nullptr;
        const int rank = t && t->dims() ? static_cast<int>(t->dims()->size()) : 0;
        const int a = axis < 0 ? axis + rank : axis;
        if (t && a >= 0 && a < rank) rows = t->dims()->Get(static_cast<uint32_t>(a))->max();
      } else if (op == OpCode::Embedding && k == 1) {
        const int32_t w = call->inputs()->Get(0);
        const fb::Tensor* t = w >= 0 ? graph.values()->Get(static_cast<uint32_t>(w)) : nullptr;
        if (t && t->dims() && t->dims()->size() > 0) rows = t->dims()->Get(0)->max();
      }
      if (rows > 0 && (bound < 0 || rows < bound)) {
        bound = rows;
        const std::string name = node_name(ins, debug);
        r.why = std::string("indices of ") + to_string(op) + (name.empty() ? "" : " '" + name + "'") + " (" +
                std::to_string(rows) + " rows)";
      }
      if (passes_values(op) || (op == OpCode::Gather && k == 0)) {
        for (uint32_t o = 0; o < call->outputs()->size(); ++o) {
          if (call->outputs()->Get(o) < reached.size()) reached[call->outputs()->Get(o)] = true;
        }
      }
    }
  }
  if (bound > 0) r.hi = bound;
  return r;
}

}  // namespace ember::tools
