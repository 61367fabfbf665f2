"""Golden cases of issue 17's reductions and index ops (reduce_max / reduce_min / reduce_prod, argmax /
argmin, topk, cumsum, gather_elements, group_norm), called from make_golden.py's main().

The references are written here in numpy (float64 where a sum or product is formed), independently of
the C++ kernels; where onnxruntime and numpy differ (NaN in argmax, ties in topk), the rule is
onnxruntime's or PyTorch's as kernels/reference/ops.h says, spelled out as a plain Python loop.
"""
import numpy as np


def generate(g):
    """g: the make_golden module (add_case, rng, randn, f32, d, EXACT, F32_TOL)."""
    r = g.rng(17)
    add_case, randn, f32, d, EXACT = g.add_case, g.randn, g.f32, g.d, g.EXACT
    nan, inf = np.float32(np.nan), np.float32(np.inf)

    # ---- reduce_max / reduce_min / reduce_prod (exact: a max is one of the inputs) --------------
    def extreme(x, axes, keepdims, is_max):
        # A plain loop over each output's elements: NaN wins, +0 > -0, empty -> the identity.
        rank = x.ndim
        red = sorted(a % rank for a in axes) if axes else list(range(rank))
        kept = [a for a in range(rank) if a not in red]
        outer = int(np.prod([x.shape[a] for a in kept]))
        flat = np.transpose(x, kept + red).reshape(outer, int(np.prod([x.shape[a] for a in red])))
        out = np.zeros(flat.shape[0], x.dtype)
        for row in range(flat.shape[0]):
            if x.dtype == np.float32:
                acc = -np.inf if is_max else np.inf
                for v in flat[row]:
                    v = float(v)
                    if np.isnan(v) or np.isnan(acc):
                        acc = np.nan
                    elif v == acc == 0.0:
                        neg = np.signbit(v) and np.signbit(acc) if is_max else np.signbit(v) or np.signbit(acc)
                        acc = -0.0 if neg else 0.0
                    elif (v > acc) == is_max and v != acc:
                        acc = v
            else:
                info = np.iinfo(x.dtype)
                acc = info.min if is_max else info.max
                for v in flat[row]:
                    acc = max(acc, int(v)) if is_max else min(acc, int(v))
            out[row] = acc
        shape = [1 if (a in red) else x.shape[a] for a in range(rank)] if keepdims else [x.shape[a] for a in kept]
        return out.reshape(shape)

    for op, is_max in (("reduce_max", True), ("reduce_min", False)):
        x = randn(r, 2, 3, 17)
        add_case(f"{op}_last_keep", op, [x], extreme(x, (-1,), True, is_max), EXACT, axes=(-1,), keepdims=True)
        y = randn(r, 2, 5, 3, 4)
        add_case(f"{op}_middle", op, [y], extreme(y, (1, 2), False, is_max), EXACT, axes=(1, -2), keepdims=False)
        add_case(f"{op}_all", op, [x], extreme(x, (), False, is_max), EXACT, axes=(), keepdims=False)
        z = np.array([[1.0, nan, 3.0], [-0.0, 0.0, -0.0], [-inf, -inf, -inf], [0.0, -0.0, 2.0]], np.float32)
        add_case(f"{op}_special", op, [z], extreme(z, (1,), False, is_max), EXACT, axes=(1,), keepdims=False)
        e = np.zeros((3, 0), np.float32)
        add_case(f"{op}_empty", op, [e], extreme(e, (1,), False, is_max), EXACT, axes=(1,), keepdims=False)
        for t in (np.int32, np.int64):
            xi = r.integers(-1000, 1000, (4, 6, 5)).astype(t)
            name = f"{op}_{np.dtype(t).name}"
            add_case(name, op, [xi], extreme(xi, (0, 2), True, is_max), EXACT, axes=(0, 2), keepdims=True)
        ei = np.zeros((2, 0), np.int64)
        add_case(f"{op}_empty_i64", op, [ei], extreme(ei, (1,), False, is_max), EXACT, axes=(1,), keepdims=False)

    x = (r.uniform(0.5, 1.5, (2, 3, 7)) * r.choice([-1.0, 1.0], (2, 3, 7))).astype(np.float32)
    add_case("reduce_prod_last", "reduce_prod", [x], f32(np.prod(d(x), axis=-1, keepdims=True)),
             axes=(-1,), keepdims=True)
    add_case("reduce_prod_two_axes", "reduce_prod", [x], f32(np.prod(d(x), axis=(0, 2))), axes=(0, 2),
             keepdims=False)
    e = np.zeros((0, 4), np.float32)
    add_case("reduce_prod_empty", "reduce_prod", [e], f32(np.prod(d(e), axis=0)), axes=(0,), keepdims=False)

    # ---- argmax / argmin: onnxruntime's scan --------------------------------------------------
    def arg(x, axis, keepdims, last, is_max):
        xm = np.moveaxis(x, axis, -1)
        flat = xm.reshape(-1, xm.shape[-1])
        out = np.zeros(flat.shape[0], np.int64)
        for row in range(flat.shape[0]):
            best, index = flat[row, 0], 0
            for i in range(1, flat.shape[1]):
                v = flat[row, i]
                if is_max:
                    better = v >= best if last else v > best
                else:
                    better = v <= best if last else v < best
                if better:
                    best, index = v, i
            out[row] = index
        out = out.reshape(xm.shape[:-1])
        return np.expand_dims(out, axis) if keepdims else out

    for op, is_max in (("argmax", True), ("argmin", False)):
        x = randn(r, 2, 5, 3)
        add_case(f"{op}_middle_keep", op, [x], arg(x, 1, True, False, is_max), EXACT, axis=1, keepdims=True)
        x = randn(r, 4, 9)
        add_case(f"{op}_last", op, [x], arg(x, -1, False, False, is_max), EXACT, axis=-1, keepdims=False)
        t = np.array([[1, 1, 2, 2, 0, 2], [3, 0, 0, 3, -1, -1]], np.float32)
        add_case(f"{op}_ties_first", op, [t], arg(t, 1, False, False, is_max), EXACT, axis=1, keepdims=False)
        add_case(f"{op}_ties_last", op, [t], arg(t, 1, False, True, is_max), EXACT, axis=1, keepdims=False,
                 select_last_index=True)
        s = np.array([[1, nan, 3], [nan, 1, 2], [4, 5, nan], [-0.0, 0.0, -0.0]], np.float32)
        add_case(f"{op}_nan", op, [s], arg(s, 1, False, False, is_max), EXACT, axis=1, keepdims=False)
        add_case(f"{op}_nan_last", op, [s], arg(s, 1, False, True, is_max), EXACT, axis=1, keepdims=False,
                 select_last_index=True)
        xi = r.integers(-5, 5, (3, 4, 2)).astype(np.int32)
        add_case(f"{op}_i32", op, [xi], arg(xi, 0, True, False, is_max), EXACT, axis=0, keepdims=True)
        xl = r.integers(-5, 5, (3, 7)).astype(np.int64)
        add_case(f"{op}_i64_last", op, [xl], arg(xl, 1, False, True, is_max), EXACT, axis=1, keepdims=False,
                 select_last_index=True)

    # ---- topk: values and indices; ties by index, NaN above every number ----------------------
    def topk(x, k, axis, largest):
        xm = np.moveaxis(x, axis, -1)
        flat = xm.reshape(-1, xm.shape[-1])
        vals = np.zeros((flat.shape[0], k), np.float32)
        idx = np.zeros((flat.shape[0], k), np.int64)
        for row in range(flat.shape[0]):
            def key(i):
                v = flat[row, i]
                rank = (1, 0.0) if np.isnan(v) else (0, float(v))
                if largest:
                    return (-rank[0], -rank[1], i)
                return (rank[0], rank[1], i)
            order = sorted(range(flat.shape[1]), key=key)[:k]
            vals[row] = flat[row, order]
            idx[row] = order
        shape = xm.shape[:-1] + (k,)
        return (np.moveaxis(vals.reshape(shape), -1, axis), np.moveaxis(idx.reshape(shape), -1, axis))

    def topk_case(name, x, k, axis, largest=True, is_sorted=True):
        v, i = topk(x, k, axis, largest)
        add_case(name, "topk", [x], [v, i], EXACT, axis=axis, k=k, largest=largest, sorted=is_sorted)

    topk_case("topk_last", randn(r, 3, 10), 4, -1)
    topk_case("topk_smallest_axis0", randn(r, 6, 2, 3), 3, 0, largest=False)
    t = np.array([[1, 1, 2, 2, 0, 2], [3, 0, 0, 3, -1, -1]], np.float32)
    topk_case("topk_ties", t, 4, 1)
    topk_case("topk_ties_smallest", t, 4, 1, largest=False)
    s = np.array([[1, nan, 3, -inf], [nan, 1, 2, nan], [4, 5, nan, inf]], np.float32)
    topk_case("topk_nan", s, 3, 1)
    topk_case("topk_nan_smallest", s, 3, 1, largest=False)
    topk_case("topk_all_unsorted", randn(r, 2, 7), 7, 1, is_sorted=False)
    topk_case("topk_zero", randn(r, 2, 5), 0, 1)

    # ---- cumsum --------------------------------------------------------------------------------
    def cumsum(x, axis, exclusive, reverse):
        xd = x.astype(np.float64) if x.dtype == np.float32 else x.astype(np.int64)
        if reverse:
            xd = np.flip(xd, axis)
        y = np.cumsum(xd, axis=axis)
        if exclusive:
            y = y - xd
        if reverse:
            y = np.flip(y, axis)
        return y.astype(x.dtype)

    x = randn(r, 2, 6, 3)
    for ex in (False, True):
        for rev in (False, True):
            add_case(f"cumsum_f32_ex{int(ex)}_rev{int(rev)}", "cumsum", [x], cumsum(x, 1, ex, rev), axis=1,
                     exclusive=ex, reverse=rev)
    xi = np.array([[2**31 - 5, 3, 4, -7], [1, 2, 3, 4]], np.int32)
    with np.errstate(over="ignore"):
        add_case("cumsum_i32_wraps", "cumsum", [xi], cumsum(xi, -1, False, False), EXACT, axis=-1,
                 exclusive=False, reverse=False)
    xl = r.integers(-100, 100, (5, 4)).astype(np.int64)
    add_case("cumsum_i64_axis0_rev_ex", "cumsum", [xl], cumsum(xl, 0, True, True), EXACT, axis=0,
             exclusive=True, reverse=True)

    # ---- gather_elements -----------------------------------------------------------------------
    def gather_elements(data, idx, axis):
        axis %= data.ndim
        coords = list(np.indices(idx.shape, sparse=False))
        coords[axis] = np.where(idx < 0, idx + data.shape[axis], idx).astype(np.int64)
        return data[tuple(coords)].reshape(idx.shape)

    data = randn(r, 3, 5)
    idx = np.array([[0, -1, 4], [2, 2, -5], [1, 3, 0]], np.int64)
    add_case("gather_elements_axis1", "gather_elements", [data, idx], gather_elements(data, idx, 1), EXACT,
             axis=1)
    idx = np.array([[2, 0, 1, 1, -3], [0, 0, 2, -1, 1]], np.int32)
    add_case("gather_elements_axis0_i32", "gather_elements", [data, idx], gather_elements(data, idx, 0), EXACT,
             axis=0)
    data = randn(r, 2, 4, 3).astype(np.float16)
    idx = r.integers(-4, 4, (2, 6, 2)).astype(np.int64)
    add_case("gather_elements_f16_rank3", "gather_elements", [data, idx], gather_elements(data, idx, -2), EXACT,
             axis=-2)
    data = r.integers(-50, 50, (4, 3)).astype(np.int64)
    idx = np.zeros((0, 3), np.int64)
    add_case("gather_elements_empty", "gather_elements", [data, idx], gather_elements(data, idx, 0), EXACT,
             axis=0)

    # ---- group_norm ------------------------------------------------------------------------------
    def group_norm(x, scale, bias, groups, eps):
        n, c = x.shape[:2]
        xg = d(x).reshape(n, groups, -1)
        mean = xg.mean(axis=-1, keepdims=True)
        var = ((xg - mean) ** 2).mean(axis=-1, keepdims=True)
        y = ((xg - mean) / np.sqrt(var + float(np.float32(eps)))).reshape(x.shape)
        shape = (1, c) + (1,) * (x.ndim - 2)
        return f32(y * d(scale).reshape(shape) + d(bias).reshape(shape))

    def gn(name, shape, groups, eps, offset=0.0):
        x = (randn(r, *shape) * 2 + offset).astype(np.float32)
        scale, bias = randn(r, shape[1]), randn(r, shape[1])
        add_case(name, "group_norm", [x, scale, bias], group_norm(x, scale, bias, groups, eps), (1e-5, 1e-5),
                 groups=groups, epsilon=eps)

    gn("group_norm_nchw", (2, 6, 4, 5), 3, 1e-5)
    gn("group_norm_instance", (2, 4, 3, 3), 4, 1e-5, offset=3.0)
    gn("group_norm_one_group_rank3", (3, 5, 7), 1, 1e-3)
    gn("group_norm_rank2", (4, 8), 2, 1e-5)
