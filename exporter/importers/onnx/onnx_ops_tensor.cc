// ONNX handlers: shape and data-movement ops (reshape, slice, gather, expand, pad, reductions, ...).
#include "exporter/importers/onnx/importer_internal.h"

#include "runtime/kernel/kernel.h"


namespace ember::exporter::onnx_detail {

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
      // An end that is an input symbol (`position_ids[:, :seq]`): bound at run time. The symbol is a
      // size, so >= 0: no wrap-around from the end of the dim can happen.
      if (is_end && steps[j] > 0 && s.is_symbol() && s.symbol_id() <= declared_symbols_) {
        a.ends_sym[j] = s.symbol_id();
        return graph_.symbols[s.symbol_id() - 1u].max;
      }
      ctx.fail(std::string(is_end ? "ends" : "starts") + "[" + std::to_string(j) + "] = " + format_sym(s, graph_) +
               " depends on run-time sizes other than the sliced dim (" + format_sym(dim, graph_) + ")" +
               (is_end ? "; only an input's symbolic size (with a positive step) is supported" : ""));
    };
    a.starts[j] = resolve(starts[j], false);
    a.ends[j] = resolve(ends[j], true);
    if (a.ends_sym[j] != 0 || !(steps[j] == 1 && a.starts[j] == 0 &&
                                (a.ends[j] == INT64_MAX || (dim.is_constant() && a.ends[j] >= dim.c)))) {
      noop = false;
    }
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
    // ceil(dim / outputs) without overflow; opset 18: the last chunk may be smaller.
    const int64_t chunk = dim.c / outputs + (dim.c % outputs != 0 ? 1 : 0);
    int64_t left = dim.c;
    for (int64_t i = 0; i < outputs; ++i) {
      sizes.push_back(std::min(chunk, left));
      left -= sizes.back();
    }
  }
  if (static_cast<int64_t>(sizes.size()) != outputs) ctx.fail("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(outputs) + " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || __builtin_add_overflow(total, s, &total)) {
      ctx.fail("split size " + std::to_string(s) + " is negative or the sizes overflow (the dim is " + std::to_string(dim.c) + ")");
    }
  }
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

// Not: the not op (issue 17), via the elementwise family's handler.
void Importer::op_not(NodeContext& ctx) { op_logical(ctx); }

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

// ReduceMean, ReduceSum, and ReduceL2 as Sqrt(ReduceSum(x * x)).
void Importer::op_reduce(NodeContext& ctx) {
  const bool sum = ctx.op_type() == "ReduceSum", l2 = ctx.op_type() == "ReduceL2";
  const size_t rank = rank_of(ctx, 0);
  const int64_t input_axes_from = sum ? 13 : 18;
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
  if (l2) {
    const int x = value_of(ctx, 0);
    const int sq = emit1(ctx, OpCode::Mul, {x, x}, OpAttrs{}, ctx.output(0) + "/square", "square");
    const int ss = emit1(ctx, OpCode::ReduceSum, {sq}, a, ctx.output(0) + "/sum", "sum");
    define_value(ctx, 0, emit1(ctx, OpCode::Sqrt, {ss}, OpAttrs{}, ctx.output(0)));
    return;
  }
  define_value(ctx, 0, emit1(ctx, sum ? OpCode::ReduceSum : OpCode::ReduceMean, {value_of(ctx, 0)}, a, ctx.output(0)));
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
  uint64_t n = 1;
  bool too_big = false, empty = false;
  for (int64_t d : dims) {
    too_big = __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n) || too_big;
    empty = empty || d == 0;
  }
  if (empty) n = 0;  // (a product that wrapped to 0 is not an empty tensor)
  if (!empty && (too_big || n > kMaxExportTimeBytes / fill.bytes.size())) {
    ctx.fail("shape " + fmt(shape->elems) + " makes a tensor larger than " + std::to_string(kMaxExportTimeBytes >> 20) +
             " MiB at export");
  }
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
  if (s->numel() != 1 || l->numel() != 1 || d->numel() != 1) {
    ctx.fail("start, limit and delta must be scalars (they hold " + std::to_string(s->numel()) + ", " +
             std::to_string(l->numel()) + " and " + std::to_string(d->numel()) + " elements)");
  }
  ++stats_.evaluated_at_export;
  if (is_integer_dtype(s->dtype)) {
    const int64_t start = read_int(*s, 0), limit = read_int(*l, 0), delta = read_int(*d, 0);
    if (delta == 0) ctx.fail("delta is 0");
    // In 128 bits: limit - start overflows int64 for extreme values.
    const __int128 span = static_cast<__int128>(limit) - start;
    const __int128 count = (span + delta + (delta > 0 ? -1 : 1)) / delta;
    if (count > static_cast<__int128>(kMaxKnownElements)) {
      ctx.fail("start " + std::to_string(start) + ", limit " + std::to_string(limit) + ", delta " + std::to_string(delta) +
               " make more than " + std::to_string(kMaxKnownElements) + " elements");
    }
    const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    Known k;
    k.dtype = s->dtype;
    k.dims = {n};
    // Unsigned steps: every element lies between start and limit, but i * delta alone may not fit.
    for (int64_t i = 0; i < n; ++i) {
      k.elems.push_back(SymInt::constant(static_cast<int64_t>(static_cast<uint64_t>(start) +
                                                              static_cast<uint64_t>(i) * static_cast<uint64_t>(delta))));
    }
    define_known(ctx, 0, std::move(k));
    return;
  }
  const double start = read_float(*s, 0), limit = read_float(*l, 0), delta = read_float(*d, 0);
  if (delta == 0) ctx.fail("delta is 0");
  const double count = std::ceil((limit - start) / delta);
  if (std::isnan(count) || count > static_cast<double>(kMaxExportTimeBytes / 4)) {
    ctx.fail("start " + std::to_string(start) + ", limit " + std::to_string(limit) + ", delta " + std::to_string(delta) +
             " make " + std::to_string(count) + " elements (more than " + std::to_string(kMaxExportTimeBytes >> 20) +
             " MiB at export)");
  }
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(start + static_cast<double>(i) * delta));
  define_constant(ctx, 0, HostTensor::from_f32({n}, v));
}

void Importer::op_quantized(NodeContext& ctx) { ctx.fail("quantized ONNX graphs are not supported yet (QDQ)"); }

// ScatterND at export only: torch.onnx.export writes it for in-place index assignment of tensors that
// are constant once the input shape is fixed (Swin's shifted-window attention mask, for one).
void Importer::op_scatter_nd(NodeContext& ctx) {
  const std::string reduction = ctx.attr_string("reduction", "none");
  if (reduction != "none") ctx.fail("reduction '" + reduction + "' is not supported (only 'none')");
  const HostTensor *data = constant_of(ctx, 0), *indices = constant_of(ctx, 1), *updates = constant_of(ctx, 2);
  if (data == nullptr || indices == nullptr || updates == nullptr) {
    ctx.fail("data, indices and updates must be known at export (a run-time ScatterND is not supported)");
  }
  if (!is_integer_dtype(indices->dtype) || indices->dtype == ScalarType::Bool) {
    ctx.fail(std::string("indices have dtype ") + to_string(indices->dtype) + ", expected an integer type");
  }
  if (updates->dtype != data->dtype) {
    ctx.fail(std::string("updates have dtype ") + to_string(updates->dtype) + ", data has " + to_string(data->dtype));
  }
  if (is_sub_byte(data->dtype)) ctx.fail(std::string("data dtype ") + to_string(data->dtype) + " is not supported");
  if (indices->dims.empty()) ctx.fail("indices must have rank >= 1");
  const size_t k = static_cast<size_t>(indices->dims.back());
  if (k > data->dims.size()) {
    ctx.fail("indices address " + std::to_string(k) + " dims of a rank-" + std::to_string(data->dims.size()) + " tensor");
  }
  // updates.shape == indices.shape[:-1] + data.shape[k:]
  std::vector<int64_t> want(indices->dims.begin(), indices->dims.end() - 1);
  want.insert(want.end(), data->dims.begin() + static_cast<std::ptrdiff_t>(k), data->dims.end());
  if (updates->dims != want) ctx.fail("updates have the wrong shape for these indices and data");
  const size_t elem = static_cast<size_t>(bits_of(data->dtype) / 8);
  size_t slice = 1;  // elements per scattered slice
  for (size_t d = k; d < data->dims.size(); ++d) slice *= static_cast<size_t>(data->dims[d]);
  const auto strides = known_ops::strides_of(data->dims);
  const size_t tuples = product(std::vector<int64_t>(indices->dims.begin(), indices->dims.end() - 1));
  HostTensor out = *data;
  for (size_t t = 0; t < tuples; ++t) {
    size_t offset = 0;
    for (size_t j = 0; j < k; ++j) {
      int64_t i = read_int(*indices, t * k + j);
      const int64_t dim = data->dims[j];
      if (i < -dim || i >= dim) {
        ctx.fail("index " + std::to_string(i) + " is out of range for dim " + std::to_string(j) + " of size " +
                 std::to_string(dim));
      }
      if (i < 0) i += dim;
      offset += static_cast<size_t>(i) * strides[j];
    }
    std::memcpy(out.bytes.data() + offset * elem, updates->bytes.data() + t * slice * elem, slice * elem);
  }
  ++stats_.evaluated_at_export;
  define_constant(ctx, 0, std::move(out));
}

}  // namespace ember::exporter::onnx_detail
