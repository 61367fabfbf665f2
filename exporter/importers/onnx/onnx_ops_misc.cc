// ONNX ops the real-model survey met (issue 17, tests/real_models) that compose from Ember ops:
// IsNaN, LogSoftmax, and GatherND with indices known at export.
#include "exporter/importers/onnx/importer_internal.h"

namespace ember::exporter::onnx_detail {

// IsNaN(x) = Not(Equal(x, x)): NaN is the one value not equal to itself (f32).
void Importer::op_isnan(NodeContext& ctx) {
  if (dtype_of(ctx, 0) != ScalarType::F32) {
    ctx.fail(std::string("input dtype ") + to_string(dtype_of(ctx, 0)) + " is not supported (f32 only)");
  }
  const int x = value_of(ctx, 0);
  const int eq = emit1(ctx, OpCode::Equal, {x, x}, OpAttrs{}, ctx.output(0) + "/self_equal", "self_equal");
  define_value(ctx, 0, emit1(ctx, OpCode::Not, {eq}, OpAttrs{}, ctx.output(0)));
}

// LogSoftmax(x) = (x - m) - log(sum(exp(x - m))) with m = max(x) along the axis: stable (no
// log of an underflowed probability), -inf only where the input is. Before opset 13 the op flattens
// to 2-D at `axis`; as for Softmax, only the last axis is taken then.
void Importer::op_log_softmax(NodeContext& ctx) {
  if (dtype_of(ctx, 0) != ScalarType::F32) {
    ctx.fail(std::string("input dtype ") + to_string(dtype_of(ctx, 0)) + " is not supported (f32 only)");
  }
  const size_t rank = rank_of(ctx, 0);
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", ctx.opset() >= 13 ? -1 : 1), rank);
  if (ctx.opset() < 13 && static_cast<size_t>(axis) != rank - 1) {
    ctx.fail("before opset 13, LogSoftmax flattens the input to 2-D at 'axis' (" + std::to_string(axis) +
             "); only the last axis is supported");
  }
  OpAttrs r;
  r.count = 1;
  r.axes[0] = axis;
  r.keepdims = true;
  const int x = value_of(ctx, 0);
  const std::string& out = ctx.output(0);
  const int m = emit1(ctx, OpCode::ReduceMax, {x}, r, out + "/max", "max");
  const int shifted = emit1(ctx, OpCode::Sub, {x, m}, OpAttrs{}, out + "/shifted", "shifted");
  const int e = emit1(ctx, OpCode::Exp, {shifted}, OpAttrs{}, out + "/exp", "exp");
  const int sum = emit1(ctx, OpCode::ReduceSum, {e}, r, out + "/sum", "sum");
  const int lg = emit1(ctx, OpCode::Log, {sum}, OpAttrs{}, out + "/log", "log");
  define_value(ctx, 0, emit1(ctx, OpCode::Sub, {shifted, lg}, OpAttrs{}, out));
}

// GatherND (batch_dims 0) with indices known at export: data [d0, .., d(r-1)], indices [.., k] pick
// data[i0, .., i(k-1), :]. data is reshaped to [d0·..·d(k-1), rest] and gathered along axis 0 with
// the flattened row numbers (computed here, negative indices wrapped, out of range refused), then
// reshaped to indices.shape[:-1] + data.shape[k:].
void Importer::op_gather_nd(NodeContext& ctx) {
  if (ctx.attr_int("batch_dims", 0) != 0) ctx.fail("batch_dims != 0 is not supported");
  const Known* idx = known_of(ctx, 1);
  if (idx == nullptr || !idx->all_constant()) {
    ctx.fail("the indices (input '" + ctx.input(1) + "') must be known at export");
  }
  const std::vector<SymInt> data_dims = dims_of(ctx, 0);
  if (idx->dims.empty()) ctx.fail("the indices must have rank >= 1");
  const size_t k = static_cast<size_t>(idx->dims.back());
  if (k < 1 || k > data_dims.size()) {
    ctx.fail("the indices' last dim " + std::to_string(k) + " must be in [1, data rank " +
             std::to_string(data_dims.size()) + "]");
  }
  int64_t rows = 1;
  for (size_t d = 0; d < k; ++d) {
    if (!data_dims[d].is_constant()) ctx.fail("data dim " + std::to_string(d) + " must be static");
    rows *= data_dims[d].c;
  }
  const size_t n = idx->numel() / k;
  Known flat;
  flat.dtype = ScalarType::I64;
  flat.dims = {static_cast<int64_t>(n)};
  for (size_t i = 0; i < n; ++i) {
    int64_t row = 0;
    for (size_t d = 0; d < k; ++d) {
      const int64_t dim = data_dims[d].c;
      int64_t v = idx->elems[i * k + d].c;
      if (v < -dim || v >= dim) {
        ctx.fail("index " + std::to_string(v) + " at position " + std::to_string(i) + " is outside [" +
                 std::to_string(-dim) + ", " + std::to_string(dim) + ") (data dim " + std::to_string(d) + ")");
      }
      if (v < 0) v += dim;
      row = row * dim + v;
    }
    flat.elems.push_back(SymInt::constant(row));
  }
  std::vector<SymInt> table = {SymInt::constant(rows)};
  for (size_t d = k; d < data_dims.size(); ++d) table.push_back(data_dims[d]);
  const std::string& out = ctx.output(0);
  const int data = emit_reshape(ctx, value_of(ctx, 0), table, out + "/table", "table");
  const int flat_id = add_constant(out + "/rows", known_to_tensor(flat));
  OpAttrs a;
  a.axis = 0;
  const int picked = emit1(ctx, OpCode::Gather, {data, flat_id}, a, out + "/picked", "picked");
  std::vector<SymInt> shape;
  for (size_t d = 0; d + 1 < idx->dims.size(); ++d) shape.push_back(SymInt::constant(idx->dims[d]));
  for (size_t d = k; d < data_dims.size(); ++d) shape.push_back(data_dims[d]);
  define_value(ctx, 0, emit_reshape(ctx, picked, shape, out));
}

}  // namespace ember::exporter::onnx_detail
