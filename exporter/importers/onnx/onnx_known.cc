// Export-time evaluation of integer "shape values" (Shape chains, index arithmetic).
#include "exporter/importers/onnx/importer_internal.h"

#include <limits>

namespace ember::exporter::onnx_detail {

// ---- Export-time shape values ------------------------------------------------------------------


bool Importer::try_known(NodeContext& ctx) {
  const std::string& op = ctx.op_type();
  using namespace known_ops;
  auto all_known = [&](size_t first, size_t last) {
    for (size_t i = first; i < last && i < ctx.input_count(); ++i) {
      if (ctx.has_input(i) && known_of(ctx, i) == nullptr) return false;
    }
    return true;
  };
  // A result above kMaxKnownElements is not evaluated element by element here: the node is
  // imported as a graph op (its known inputs become constants), like a large integer constant.
  auto too_big = [](const std::vector<int64_t>& dims) { return product(dims) > kMaxKnownElements; };
  auto finish = [&](Known k, size_t output = 0) {
    ++stats_.evaluated_at_export;
    define_known(ctx, output, std::move(k));
  };

  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal" || op == "Less" ||
      op == "Greater" || op == "Max" || op == "Min" || op == "Mod" || op == "And" || op == "Or" ||
      op == "GreaterOrEqual" || op == "LessOrEqual" || op == "Xor" || op == "Sum") {
    // Max / Min / Sum take 1..N inputs (one input: the handler's alias).
    if (ctx.input_count() < 2 || !all_known(0, ctx.input_count())) return false;
    const Known* a = known_of(ctx, 0);
    Known acc = *a;
    for (size_t in = 1; in < ctx.input_count(); ++in) {
      const Known* b = known_of(ctx, in);
      if ((op != "Max" && op != "Min" && op != "Sum") && in > 1) ctx.fail("takes 2 inputs");
      Known r;
      if (!broadcast(acc.dims, b->dims, &r.dims)) ctx.fail("shapes do not broadcast");
      const bool compare = op == "Equal" || op == "Less" || op == "Greater" || op == "GreaterOrEqual" ||
                           op == "LessOrEqual";
      r.dtype = compare ? ScalarType::Bool : acc.dtype;
      if (too_big(r.dims)) return false;
      const size_t n = product(r.dims);
      for (size_t i = 0; i < n; ++i) {
        const SymInt& x = acc.elems[broadcast_index(r.dims, i, acc.dims)];
        const SymInt& y = b->elems[broadcast_index(r.dims, i, b->dims)];
        SymInt v;
        if (op == "Add" || op == "Sum") v = sym_add(x, y);
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
        else if (op == "And" || op == "Or" || op == "Xor") {
          if (!x.is_constant() || !y.is_constant()) v = SymInt::unknown();
          else v = SymInt::constant(op == "And" ? (x.c && y.c) : op == "Or" ? (x.c || y.c) : ((x.c != 0) != (y.c != 0)));
        } else {
          // x >= y is not (x < y), x <= y not (y < x).
          const bool negate = op == "GreaterOrEqual" || op == "LessOrEqual";
          const int t = op == "Equal"                                ? sym_equal(x, y, graph_)
                        : (op == "Less" || op == "GreaterOrEqual") ? sym_less(x, y, graph_)
                                                                   : sym_less(y, x, graph_);
          v = t < 0 ? SymInt::unknown() : SymInt::constant(negate ? 1 - t : t);
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
    if (too_big(r.dims)) return false;
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
    // A symbolic end (`position_ids[:, :seq]`) is a run-time Slice of the data (op_slice).
    const Known* ends_known = ctx.has_input(2) ? known_of(ctx, 2) : nullptr;
    if (ends_known != nullptr && !ends_known->all_constant()) return false;
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
      if (steps[j] == 0 || steps[j] == INT64_MIN) ctx.fail("step " + std::to_string(steps[j]));
      int64_t s = starts[j], e = ends[j];
      if (s < 0) s += dim;
      if (e < 0) e += dim;
      if (steps[j] > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        count[static_cast<size_t>(ax)] = e > s ? (e - s - 1) / steps[j] + 1 : 0;  // ceil, without overflow
      } else {
        s = std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        count[static_cast<size_t>(ax)] = s > e ? (s - e - 1) / (-steps[j]) + 1 : 0;
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
        } else if (shape[i] < -1 || __builtin_mul_overflow(known_prod, shape[i], &known_prod)) {
          ctx.fail("shape entry " + std::to_string(shape[i]) + " is invalid or the shape's product overflows");
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
      for (int64_t i = 0; i < axis; ++i) {
        if (__builtin_mul_overflow(left, data->dims[static_cast<size_t>(i)], &left)) ctx.fail("the flattened size overflows");
      }
      r.dims = {left, left ? static_cast<int64_t>(data->numel()) / left : 0};
    } else if (op == "Expand") {
      const std::vector<int64_t> shape = ints_of(ctx, 1, "shape");
      std::vector<int64_t> out;
      if (!broadcast(data->dims, shape, &out)) ctx.fail("cannot expand");
      if (too_big(out)) return false;
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

}  // namespace ember::exporter::onnx_detail
