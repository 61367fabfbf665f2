#!/usr/bin/python3
"""Golden data for the reference kernels (kernels/reference/), computed with numpy in float64.

Writes <case>.in<i>.npy / <case>.out.npy and manifest.txt into tests/data/golden/. Run with
Debian's /usr/bin/python3 (numpy 1.24); fixed seeds, so a rerun rewrites identical bytes:

    /usr/bin/python3 tests/kernels/reference/make_golden.py

manifest.txt: one case per line, space-separated key=value tokens:
    name=<case> op=<op> inputs=<f0>,<f1>|-,... output=<f>[,<f>...] rtol=<r> atol=<a> [attributes]
'-' is an absent optional input. Attributes (lists comma-separated): axis, epsilon,
approx (none|tanh), kernel, stride, padding (top,left,bottom,right), dilation, groups, ceil_mode,
count_include_pad, shape, shape_sym, symbols, perm, axes, starts, ends, steps, clip_min, clip_max,
alpha, beta, keepdims, pads, pad_value, mode (constant|reflect|edge), to (a dtype name: f32, f16,
i8, ...), direction (forward|reverse|bidirectional), hidden_size, activations (names),
rnn_alpha, rnn_beta, clip, input_forget, linear_before_reset, output_padding, resize_mode
(nearest|linear|cubic), coord, nearest_mode, cubic_a, exclude_outside, scales (resize's f32 scales;
shape holds its sizes), select_last_index, k, largest, sorted, exclusive, reverse. axes without
starts is a reduction's axis list. rtol=0 atol=0 means bytes must match exactly. output= lists
several files, comma-separated, for ops with several outputs (topk, lstm, gru).

The conv and pool references below follow PyTorch's definitions and are written independently of
the C++ kernels.
"""

import math
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_reduce_index  # noqa: E402  (issue 17: reductions and index ops)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "data", "golden"))

F32_TOL = (1e-5, 1e-6)
EXACT = (0.0, 0.0)
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

cases = []  # manifest lines


def rng(seed):
    return np.random.default_rng(seed)


def randn(r, *shape):
    return r.standard_normal(shape).astype(np.float32)


def fmt_value(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return ",".join(fmt_value(x) for x in v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def c_order(x):
    # np.save writes Fortran-ordered arrays as such; ascontiguousarray would turn 0-d into 1-d.
    return np.array(x, order="C", copy=True)


def add_case(name, op, inputs, output, tol=F32_TOL, **attrs):
    names = []
    for i, x in enumerate(inputs):
        if x is None:
            names.append("-")
            continue
        fname = f"{name}.in{i}.npy"
        np.save(os.path.join(OUT_DIR, fname), c_order(x))
        names.append(fname)
    if output is None:  # the caller writes several outputs itself and patches the line (gen_rnn)
        out_name = f"{name}.out.npy"
    else:
        if isinstance(output, list):  # several outputs (topk): <case>.out<k>.npy, listed in order
            out_names = [f"{name}.out{k}.npy" for k in range(len(output))]
        else:
            out_names, output = [f"{name}.out.npy"], [output]
        for out_name, out in zip(out_names, output):
            np.save(os.path.join(OUT_DIR, out_name), c_order(out))
        out_name = ",".join(out_names)
    tokens = [f"name={name}", f"op={op}", "inputs=" + ",".join(names), f"output={out_name}",
              f"rtol={tol[0]!r}", f"atol={tol[1]!r}"]
    for key in sorted(attrs):
        tokens.append(f"{key}={fmt_value(attrs[key])}")
    cases.append(" ".join(tokens))


def f32(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32)


def d(x):
    return np.asarray(x, dtype=np.float64)


# ---- elementwise --------------------------------------------------------------------------------

def gen_elementwise():
    r = rng(1)
    a, b = randn(r, 2, 3, 5), randn(r, 2, 3, 5)
    add_case("add_same", "add", [a, b], f32(d(a) + d(b)))
    a, b = randn(r, 4, 1, 3), randn(r, 5, 1)
    add_case("add_broadcast", "add", [a, b], f32(d(a) + d(b)))
    a, b = randn(r, 3, 7), np.array(1.5, dtype=np.float32)
    add_case("sub_scalar", "sub", [a, b], f32(d(a) - d(b)))
    a, b = randn(r, 1, 4), randn(r, 3, 1)
    add_case("sub_broadcast_both", "sub", [a, b], f32(d(a) - d(b)))
    a, b = randn(r, 2, 1, 4, 1), randn(r, 3, 1, 5)
    add_case("mul_broadcast_rank", "mul", [a, b], f32(d(a) * d(b)))
    a = randn(r, 3, 4)
    b = (r.uniform(0.5, 2.0, (4,)) * r.choice([-1.0, 1.0], (4,))).astype(np.float32)
    add_case("div_broadcast", "div", [a, b], f32(d(a) / d(b)))
    a = randn(r, 0, 3)
    b = randn(r, 3)
    add_case("add_empty", "add", [a, b], f32(d(a) + d(b)))

    x = (randn(r, 37) * 3).astype(np.float32)
    add_case("relu_odd", "relu", [x], f32(np.maximum(d(x), 0.0)))
    x = (randn(r, 2, 17) * 4).astype(np.float32)
    add_case("sigmoid", "sigmoid", [x], f32(1.0 / (1.0 + np.exp(-d(x)))))
    add_case("silu", "silu", [x], f32(d(x) / (1.0 + np.exp(-d(x)))))
    add_case("tanh", "tanh", [x], f32(np.tanh(d(x))))
    x = (randn(r, 3, 11) * 3).astype(np.float32)
    erf = np.vectorize(math.erf)
    add_case("gelu_erf", "gelu", [x], f32(0.5 * d(x) * (1.0 + erf(d(x) / math.sqrt(2.0)))),
             approx="none")
    k = math.sqrt(2.0 / math.pi)
    xd = d(x)
    add_case("gelu_tanh", "gelu", [x], f32(0.5 * xd * (1.0 + np.tanh(k * (xd + 0.044715 * xd**3)))),
             approx="tanh")


# ---- matmul / linear ----------------------------------------------------------------------------

def gen_linalg():
    r = rng(2)
    a, b = randn(r, 5, 7), randn(r, 7, 3)
    add_case("matmul_2d", "matmul", [a, b], f32(d(a) @ d(b)))
    a, b = randn(r, 2, 3, 4, 5), randn(r, 2, 3, 5, 6)
    add_case("matmul_batched", "matmul", [a, b], f32(d(a) @ d(b)))
    a, b = randn(r, 2, 1, 3, 4), randn(r, 5, 4, 2)
    add_case("matmul_broadcast", "matmul", [a, b], f32(d(a) @ d(b)))
    a, b = randn(r, 1, 9), randn(r, 9, 1)
    add_case("matmul_vector_like", "matmul", [a, b], f32(d(a) @ d(b)))

    x, w, bias = randn(r, 3, 4, 7), randn(r, 5, 7), randn(r, 5)
    add_case("linear_bias", "linear", [x, w, bias], f32(d(x) @ d(w).T + d(bias)))
    x, w = randn(r, 6, 9), randn(r, 4, 9)
    add_case("linear_absent_bias", "linear", [x, w, None], f32(d(x) @ d(w).T))
    x, w = randn(r, 13), randn(r, 3, 13)
    add_case("linear_two_inputs", "linear", [x, w], f32(d(x) @ d(w).T))


# ---- conv / pool (PyTorch semantics) ------------------------------------------------------------

def conv2d_ref(x, w, b, stride, padding, dilation, groups):
    x, w = d(x), d(w)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    pt, pl, pb, pr = padding
    sh, sw = stride
    dh, dw = dilation
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow))
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * og:(g + 1) * og]
        for y in range(oh):
            ys = y * sh + np.arange(kh) * dh
            for xo in range(ow):
                xs = xo * sw + np.arange(kw) * dw
                patch = xg[:, :, ys][:, :, :, xs]  # n, cg, kh, kw
                out[:, g * og:(g + 1) * og, y, xo] = np.einsum("nckl,ockl->no", patch, wg)
    if b is not None:
        out += d(b)[None, :, None, None]
    return f32(out)


def pool_out_size(size, k, s, d_, pad_begin, pad_end, ceil_mode):
    # torch/aten pooling_output_shape, in Python's floor division.
    out = (size + pad_begin + pad_end - d_ * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + pad_begin:
        out -= 1
    return out


def pool_ref(x, kind, kernel, stride, padding, dilation, ceil_mode, count_include_pad=False):
    x = d(x)
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = stride
    dh, dw = dilation
    pt, pl, pb, pr = padding
    oh = pool_out_size(h, kh, sh, dh, pt, pb, ceil_mode)
    ow = pool_out_size(w, kw, sw, dw, pl, pr, ceil_mode)
    assert oh >= 1 and ow >= 1
    out = np.zeros((n, c, oh, ow))
    for y in range(oh):
        for xo in range(ow):
            iy = y * sh - pt + np.arange(kh) * dh
            ix = xo * sw - pl + np.arange(kw) * dw
            vy = iy[(iy >= 0) & (iy < h)]
            vx = ix[(ix >= 0) & (ix < w)]
            window = x[:, :, vy][:, :, :, vx]
            if kind == "max":
                out[:, :, y, xo] = window.max(axis=(2, 3))
            else:
                if count_include_pad:
                    # Taps inside the padded extent; ceil_mode windows may overhang it.
                    divisor = int(np.sum(iy < h + pb)) * int(np.sum(ix < w + pr))
                else:
                    divisor = len(vy) * len(vx)
                out[:, :, y, xo] = window.sum(axis=(2, 3)) / divisor
    return f32(out)


def gen_conv_pool():
    r = rng(3)

    def conv(name, xs, ws, bias, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
        x, w = randn(r, *xs), randn(r, *ws)
        b = randn(r, ws[0]) if bias else None
        inputs = [x, w] + ([b] if bias else [None])
        add_case(name, "conv2d", inputs, conv2d_ref(x, w, b, stride, padding, dilation, groups),
                 stride=stride, padding=padding, dilation=dilation, groups=groups)

    conv("conv_basic", (1, 3, 8, 8), (4, 3, 3, 3), True, padding=(1, 1, 1, 1))
    conv("conv_stride_asym_pad", (2, 2, 9, 7), (3, 2, 3, 2), False, stride=(2, 3),
         padding=(1, 0, 2, 1))
    conv("conv_dilation", (1, 2, 10, 9), (2, 2, 3, 3), True, padding=(2, 1, 2, 1),
         dilation=(2, 3))
    conv("conv_groups", (1, 4, 6, 6), (6, 2, 3, 3), True, stride=(2, 2), padding=(1, 1, 1, 1),
         groups=2)
    conv("conv_depthwise", (2, 3, 7, 5), (3, 1, 3, 3), False, padding=(1, 1, 1, 1), groups=3)
    conv("conv_pointwise", (1, 5, 3, 4), (7, 5, 1, 1), True)
    # Stride larger than the kernel, odd sizes.
    conv("conv_stride_gt_kernel", (1, 1, 11, 13), (2, 1, 2, 2), True, stride=(3, 4))

    def pool(name, kind, xs, kernel, stride, padding=(0, 0, 0, 0), dilation=(1, 1),
             ceil_mode=False, count_include_pad=False):
        x = randn(r, *xs)
        op = "max_pool2d" if kind == "max" else "avg_pool2d"
        add_case(name, op, [x],
                 pool_ref(x, kind, kernel, stride, padding, dilation, ceil_mode, count_include_pad),
                 kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                 ceil_mode=ceil_mode, count_include_pad=count_include_pad)

    pool("maxpool_basic", "max", (1, 2, 6, 6), (2, 2), (2, 2))
    pool("maxpool_ceil", "max", (1, 2, 7, 7), (3, 3), (2, 2), ceil_mode=True)
    pool("maxpool_pad_dilation", "max", (2, 1, 9, 8), (3, 2), (2, 1), padding=(1, 1, 1, 0),
         dilation=(2, 1))
    # in 5, k 2, s 2, pad 1, ceil: the 4th window would start in the right padding, so 3 outputs.
    pool("maxpool_ceil_drops_last", "max", (1, 1, 5, 5), (2, 2), (2, 2), padding=(1, 1, 1, 1),
         ceil_mode=True)
    pool("avgpool_basic", "avg", (1, 2, 6, 6), (2, 2), (2, 2))
    pool("avgpool_pad_include", "avg", (1, 2, 7, 7), (3, 3), (2, 2), padding=(1, 1, 1, 1),
         count_include_pad=True)
    pool("avgpool_pad_exclude", "avg", (1, 2, 7, 7), (3, 3), (2, 2), padding=(1, 1, 1, 1),
         count_include_pad=False)
    pool("avgpool_ceil_include", "avg", (2, 1, 6, 6), (3, 3), (2, 2), padding=(1, 1, 1, 1),
         ceil_mode=True, count_include_pad=True)
    pool("avgpool_ceil_exclude", "avg", (2, 1, 6, 6), (3, 3), (2, 2), padding=(1, 1, 1, 1),
         ceil_mode=True, count_include_pad=False)
    pool("avgpool_asym_pad", "avg", (1, 3, 5, 8), (2, 3), (1, 2), padding=(1, 0, 0, 1),
         count_include_pad=True)

    x = randn(r, 2, 3, 5, 7)
    add_case("global_avg_pool", "global_avg_pool2d", [x],
             f32(d(x).mean(axis=(2, 3), keepdims=True)))


# ---- softmax / layer_norm -----------------------------------------------------------------------

def softmax_ref(x, axis):
    x = d(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return f32(e / e.sum(axis=axis, keepdims=True))


def layer_norm_ref(x, axis, gamma, beta, eps):
    x = d(x)
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + float(np.float32(eps)))
    if gamma is not None:
        y = y * d(gamma)
    if beta is not None:
        y = y + d(beta)
    return f32(y)


def gen_norm():
    r = rng(4)
    x = randn(r, 3, 7)
    add_case("softmax_last", "softmax", [x], softmax_ref(x, -1), axis=-1)
    x = randn(r, 2, 5, 3)
    add_case("softmax_middle", "softmax", [x], softmax_ref(x, 1), axis=1)
    x = randn(r, 2, 3, 4)
    add_case("softmax_negative_first", "softmax", [x], softmax_ref(x, -3), axis=-3)
    x = (randn(r, 4, 9) * 30 + 100).astype(np.float32)  # exp overflows without max subtraction
    add_case("softmax_large", "softmax", [x], softmax_ref(x, -1), axis=-1)

    eps = 1e-5
    x, g, b = randn(r, 2, 3, 8), randn(r, 8), randn(r, 8)
    add_case("layer_norm_last", "layer_norm", [x, g, b], layer_norm_ref(x, -1, g, b, eps),
             axis=-1, epsilon=eps)
    x, g, b = randn(r, 2, 3, 4), randn(r, 3, 4), randn(r, 3, 4)
    add_case("layer_norm_two_dims", "layer_norm", [x, g, b], layer_norm_ref(x, 1, g, b, eps),
             axis=1, epsilon=eps)
    x, g = (randn(r, 5, 6) * 2 + 3).astype(np.float32), randn(r, 6)
    add_case("layer_norm_gamma_only", "layer_norm", [x, g, None],
             layer_norm_ref(x, -1, g, None, eps), axis=-1, epsilon=eps)
    x, b = randn(r, 4, 5), randn(r, 5)
    add_case("layer_norm_beta_only", "layer_norm", [x, None, b],
             layer_norm_ref(x, -1, None, b, 1e-3), axis=-1, epsilon=1e-3)
    x = randn(r, 3, 10)
    add_case("layer_norm_plain", "layer_norm", [x, None, None],
             layer_norm_ref(x, 1, None, None, eps), axis=1, epsilon=eps)
    x = randn(r, 2, 7)
    add_case("layer_norm_x_only", "layer_norm", [x], layer_norm_ref(x, -1, None, None, eps),
             axis=-1, epsilon=eps)


# ---- data movement ------------------------------------------------------------------------------

def slice_ref(x, axes, starts, ends, steps):
    """ONNX Slice, from the operator's definition."""
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps):
        axis %= x.ndim
        dim = x.shape[axis]
        if start < 0:
            start += dim
        if end < 0:
            end += dim
        if step > 0:
            start = min(max(start, 0), dim)
            end = min(max(end, 0), dim)
            idx = list(range(start, end, step))
        else:
            start = min(max(start, 0), dim - 1)
            end = min(max(end, -1), dim - 1)
            idx = list(range(start, end, step)) if dim > 0 else []
        index[axis] = np.array(idx, dtype=np.int64)
    out = x
    for axis, ix in enumerate(index):
        if isinstance(ix, np.ndarray):
            out = np.take(out, ix, axis=axis)
    return np.ascontiguousarray(out)


def gen_movement():
    r = rng(5)
    x = randn(r, 2, 3, 4)
    add_case("reshape_infer", "reshape", [x], x.reshape(4, 6), EXACT, shape=(4, -1),
             shape_sym=(0, 0))
    x = r.integers(-1000, 1000, (3, 2, 4), dtype=np.int32)
    # dim 0 comes from symbol 2 (value 6), dim 1 is inferred.
    add_case("reshape_symbol", "reshape", [x], x.reshape(6, 4), EXACT, shape=(1, -1),
             shape_sym=(2, 0), symbols=(5, 6))
    x = np.zeros((2, 0, 3), dtype=np.float32)
    add_case("reshape_literal_zero", "reshape", [x], x.reshape(0, 5, 1), EXACT, shape=(0, 5, 1),
             shape_sym=(0, 0, 0))
    x = r.integers(0, 2, (6,), dtype=np.uint8).astype(bool)
    add_case("reshape_bool", "reshape", [x], x.reshape(1, 2, 3), EXACT,
             shape=(1, 2, 3), shape_sym=(0, 0, 0))
    x = randn(r, 1, 1)
    add_case("reshape_to_scalar", "reshape", [x], x.reshape(()), EXACT, shape=(), shape_sym=())

    x = randn(r, 2, 3, 4)
    add_case("transpose_3d", "transpose", [x], np.transpose(x, (2, 0, 1)), EXACT, perm=(2, 0, 1))
    x = r.integers(-2**40, 2**40, (2, 3, 4, 5), dtype=np.int64)
    add_case("transpose_4d_i64", "transpose", [x], np.transpose(x, (3, 1, 0, 2)), EXACT,
             perm=(3, 1, 0, 2))
    x = r.integers(0, 256, (5, 7), dtype=np.uint8)
    add_case("transpose_2d_u8", "transpose", [x], x.T, EXACT, perm=(1, 0))
    x = randn(r, 3, 1, 5).astype(np.float16)
    add_case("transpose_f16", "transpose", [x], np.transpose(x, (1, 2, 0)), EXACT, perm=(1, 2, 0))

    a, b, c = randn(r, 2, 3), randn(r, 1, 3), randn(r, 4, 3)
    add_case("concat_axis0", "concat", [a, b, c], np.concatenate([a, b, c], 0), EXACT, axis=0)
    a, b = (r.integers(-9, 9, (2, 3, 2), dtype=np.int32) for _ in range(2))
    add_case("concat_last_i32", "concat", [a, b], np.concatenate([a, b], -1), EXACT, axis=-1)
    parts = [r.integers(0, 2, (2, n, 3)).astype(bool) for n in (1, 0, 2, 3)]
    add_case("concat_bool_with_empty", "concat", parts, np.concatenate(parts, 1), EXACT, axis=1)
    a = randn(r, 3, 2)
    add_case("concat_single", "concat", [a], a.copy(), EXACT, axis=1)
    parts = [r.integers(-100, 100, (2, 2), dtype=np.int16) for _ in range(15)]
    add_case("concat_fifteen_i16", "concat", parts, np.concatenate(parts, 0), EXACT, axis=0)

    def slc(name, x, axes, starts, ends, steps):
        add_case(name, "slice", [x], slice_ref(x, axes, starts, ends, steps), EXACT, axes=axes,
                 starts=starts, ends=ends, steps=steps)

    slc("slice_step2", randn(r, 10), [0], [1], [8], [2])
    slc("slice_reverse_2d", randn(r, 5, 6), [1, 0], [-1, 4], [INT64_MIN, 0], [-1, -2])
    slc("slice_clamp_i64", r.integers(-50, 50, (3, 4, 5), dtype=np.int64), [-1, 0],
        [-3, -100], [1000, INT64_MAX], [1, 2])
    slc("slice_empty", randn(r, 4, 3), [0], [3], [1], [1])
    slc("slice_negative_step3_u8", r.integers(0, 255, (2, 11), dtype=np.uint8), [1],
        [100], [-100], [-3])
    slc("slice_no_axes", randn(r, 2, 3), [], [], [], [])
    slc("slice_huge_step", randn(r, 4, 6), [1], [2], [INT64_MAX], [INT64_MAX])


# ---- ops added for the ONNX importer ------------------------------------------------------------

def cast_float_to_int(x, dtype):
    """Ember's Cast rule for float -> int: truncate toward zero, NaN -> 0, saturate."""
    info = np.iinfo(dtype)
    x = np.trunc(d(x))
    x = np.where(np.isnan(x), 0.0, x)
    out = np.empty(x.shape, dtype=dtype)
    flat_in, flat_out = x.reshape(-1), out.reshape(-1)
    for i, v in enumerate(flat_in):
        flat_out[i] = info.min if v <= info.min else (info.max if v >= info.max else int(v))
    return out


def pad_ref(x, pads, mode, value):
    """ONNX Pad: positive pads with np.pad on the input, then negative pads crop the result."""
    rank = x.ndim
    begins, ends = pads[:rank], pads[rank:]
    width = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
    if mode == "constant":
        if x.dtype == np.bool_:
            fill = value != 0.0
        elif np.issubdtype(x.dtype, np.integer):
            fill = cast_float_to_int(np.float32(value), x.dtype)[()]
        else:
            fill = x.dtype.type(value)
        out = np.pad(x, width, mode="constant", constant_values=fill)
    else:
        out = np.pad(x, width, mode={"reflect": "reflect", "edge": "edge"}[mode])
    index = tuple(slice(-min(b, 0), out.shape[i] + min(e, 0)) for i, (b, e) in
                  enumerate(zip(begins, ends)))
    return np.ascontiguousarray(out[index])


def gather_ref(data, indices, axis):
    """ONNX Gather; an index outside [-dim, dim) gives zeros (Ember's run-time rule)."""
    axis %= data.ndim
    dim = data.shape[axis]
    idx = np.asarray(indices, dtype=np.int64)
    wrapped = np.where(idx < 0, idx + dim, idx)
    valid = (wrapped >= 0) & (wrapped < dim)
    out = np.take(data, np.where(valid, wrapped, 0), axis=axis)
    mask_shape = (1,) * axis + idx.shape + (1,) * (data.ndim - axis - 1)
    return np.ascontiguousarray(np.where(valid.reshape(mask_shape), out, np.zeros((), data.dtype)))


def gen_importer_ops():
    r = rng(6)
    erf = np.vectorize(math.erf, otypes=[np.float64])

    x = (randn(r, 3, 11) * 4).astype(np.float32)
    add_case("clip_basic", "clip", [x], f32(np.minimum(np.maximum(d(x), -1.5), 2.0)),
             clip_min=-1.5, clip_max=2.0)
    add_case("clip_relu6_inf_min", "clip", [x], f32(np.minimum(np.maximum(d(x), -np.inf), 6.0)),
             clip_min=float("-inf"), clip_max=6.0)
    add_case("clip_inverted", "clip", [x], f32(np.minimum(np.maximum(d(x), 3.0), 1.0)),
             clip_min=3.0, clip_max=1.0)
    x = (randn(r, 2, 19) * 4).astype(np.float32)
    alpha, beta = float(np.float32(0.2)), 0.5
    add_case("hard_sigmoid", "hard_sigmoid", [x], f32(np.clip(alpha * d(x) + beta, 0.0, 1.0)),
             alpha=0.2, beta=0.5)
    x = np.concatenate([(randn(r, 29) * 4), np.float32([-3, 3, -3.5, 3.5, 0])]).astype(np.float32)
    add_case("hard_swish", "hard_swish", [x], f32(d(x) * np.clip(d(x) + 3.0, 0.0, 6.0) / 6.0))
    x = (randn(r, 3, 13) * 2).astype(np.float32)
    add_case("erf", "erf", [x], f32(erf(d(x))))
    x = np.concatenate([np.abs(randn(r, 20)) * 10, np.float32([0.0, -1.0, 1e-30])]).astype(
        np.float32)
    with np.errstate(invalid="ignore"):
        add_case("sqrt_with_negative", "sqrt", [x], f32(np.sqrt(d(x))))
    x = (randn(r, 4, 9) * 5).astype(np.float32)
    add_case("exp", "exp", [x], f32(np.exp(d(x))))
    x = np.concatenate([randn(r, 15), np.float32([0.0, -0.0])]).astype(np.float32)
    add_case("neg", "neg", [x], f32(-d(x)), EXACT)

    a, b = np.abs(randn(r, 3, 7)) + 0.1, randn(r, 3, 7)
    add_case("pow_same", "pow", [a.astype(np.float32), b], f32(np.power(d(a.astype(np.float32)),
                                                                         d(b))))
    a = randn(r, 2, 3, 5)
    for name, e in (("pow_square", 2.0), ("pow_cube", 3.0), ("pow_half", 0.5)):
        b = np.float32(e).reshape(())
        base = np.abs(a) if e == 0.5 else a
        add_case(name, "pow", [base, b], f32(np.power(d(base), d(b))))
    a, b = np.abs(randn(r, 4, 1, 3)) + 0.5, randn(r, 5, 1)
    add_case("pow_broadcast", "pow", [a.astype(np.float32), b],
             f32(np.power(d(a.astype(np.float32)), d(b))))

    x = randn(r, 2, 3, 17)
    for op, fn in (("reduce_mean", np.mean), ("reduce_sum", np.sum)):
        add_case(f"{op}_last_keep", op, [x], f32(fn(d(x), axis=-1, keepdims=True)), axes=(-1,),
                 keepdims=True)
        add_case(f"{op}_two_axes", op, [x], f32(fn(d(x), axis=(0, 2), keepdims=False)),
                 axes=(2, 0), keepdims=False)
        add_case(f"{op}_all", op, [x], f32(fn(d(x), keepdims=False)), axes=(), keepdims=False)
        y = randn(r, 2, 5, 3, 4)
        add_case(f"{op}_middle_keep", op, [y], f32(fn(d(y), axis=(1, 2), keepdims=True)),
                 axes=(1, -2), keepdims=True)
    e = np.zeros((3, 0), dtype=np.float32)
    add_case("reduce_sum_empty", "reduce_sum", [e], f32(d(e).sum(axis=1)), axes=(1,),
             keepdims=False)
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy: "Mean of empty slice" (NaN)
        add_case("reduce_mean_empty", "reduce_mean", [e], f32(d(e).mean(axis=1)), axes=(1,),
                 keepdims=False)

    def pad(name, x, pads, mode="constant", value=0.0):
        add_case(name, "pad", [x], pad_ref(x, list(pads), mode, value), EXACT, pads=pads,
                 pad_value=float(value), mode=mode)

    pad("pad_nchw_constant", randn(r, 1, 2, 4, 5), (0, 0, 1, 2, 0, 0, 2, 1), value=0.5)
    pad("pad_reflect", randn(r, 2, 4, 5), (0, 3, 2, 0, 1, 4), "reflect")
    pad("pad_edge", randn(r, 3, 1, 2), (1, 2, 0, 0, 3, 1), "edge")
    pad("pad_crop_and_pad", randn(r, 4, 6), (-1, 2, 1, -3), value=-2.0)
    pad("pad_reflect_crop", randn(r, 5, 4), (2, -1, -1, 3), "reflect")
    pad("pad_i64_value", r.integers(-9, 9, (2, 3), dtype=np.int64), (1, 0, 0, 2), value=-7.9)
    pad("pad_u8_saturates", r.integers(0, 255, (3, 2), dtype=np.uint8), (1, 1, 1, 1), value=300.7)
    pad("pad_f16", randn(r, 2, 3).astype(np.float16), (0, 1, 1, 0), value=1.0 / 3.0)
    pad("pad_bool", r.integers(0, 2, (2, 2)).astype(bool), (1, 0, 0, 1), value=2.0)
    pad("pad_empty_axis", np.zeros((0, 2), dtype=np.float32), (1, 0, 2, 0), value=4.0)

    def gather(name, data, indices, axis):
        add_case(name, "gather", [data, indices], gather_ref(data, indices, axis), EXACT,
                 axis=axis)

    gather("gather_rows_i64", randn(r, 5, 4), np.array([[0, -1, 3], [2, 2, -5]], np.int64), 0)
    gather("gather_scalar_i32", randn(r, 2, 5, 3), np.array(4, np.int32), 1)
    gather("gather_out_of_range", r.integers(-99, 99, (3, 5), dtype=np.int32),
           np.array([1, 7, -9, -1, 5], np.int32), 1)
    gather("gather_u8_last", r.integers(0, 255, (2, 3, 4), dtype=np.uint8),
           np.array([[3, 0]], np.int64), -1)
    gather("gather_bool_empty_indices", r.integers(0, 2, (4, 2)).astype(bool),
           np.zeros((0,), np.int64), 0)

    c = r.integers(0, 2, (2, 1, 4)).astype(bool)
    x, y = randn(r, 3, 1), randn(r, 4)
    add_case("where_broadcast", "where", [c, x, y], np.where(c, x, y), EXACT)
    c = r.integers(0, 2, (3, 5)).astype(bool)
    x, y = (r.integers(-2**40, 2**40, (3, 5), dtype=np.int64) for _ in range(2))
    add_case("where_i64", "where", [c, x, y], np.where(c, x, y), EXACT)
    c = np.array(True)
    x, y = r.integers(0, 255, (2, 3), dtype=np.uint8), r.integers(0, 255, (3,), dtype=np.uint8)
    add_case("where_scalar_cond_u8", "where", [c, x, y], np.where(c, x, y), EXACT)

    a = np.float32([1.0, np.nan, 0.0, -0.0, 2.5, 3.0])
    b = np.float32([1.0, np.nan, -0.0, 0.0, 2.4, 3.0])
    add_case("equal_f32_nan_zero", "equal", [a, b], np.equal(a, b), EXACT)
    a, b = r.integers(-3, 3, (4, 1), dtype=np.int32), r.integers(-3, 3, (5,), dtype=np.int32)
    add_case("equal_i32_broadcast", "equal", [a, b], np.equal(a, b), EXACT)
    a = np.array([2**40, -1, 7], np.int64)
    b = np.array([2**40, 1, 7], np.int64)
    add_case("equal_i64", "equal", [a, b], np.equal(a, b), EXACT)
    a, b = r.integers(0, 2, (2, 3)).astype(bool), r.integers(0, 2, (3,)).astype(bool)
    add_case("equal_bool", "equal", [a, b], np.equal(a, b), EXACT)

    def cast(name, x, to, expected):
        add_case(name, "cast", [x], expected, EXACT, to=to)

    specials = np.float32([0.0, -0.0, 1.5, -1.5, 2.9999, -2.9999, 1e10, -1e10, 3e38, -3e38,
                           np.inf, -np.inf, np.nan, 127.9, 128.0, -128.9, -129.0, 255.5, 256.0])
    for to, dt in (("i8", np.int8), ("u8", np.uint8), ("i16", np.int16), ("i32", np.int32),
                   ("i64", np.int64)):
        cast(f"cast_f32_{to}_saturates", specials, to, cast_float_to_int(specials, dt))
    cast("cast_f32_bool", specials, "bool", specials != 0)
    x = np.concatenate([randn(r, 40) * 1000, np.float32([65504.0, 65519.0, 65520.0, 1e-7, 6e-8,
                                                         3e-8, -2e-8, np.nan, np.inf])])
    with np.errstate(over="ignore"):
        cast("cast_f32_f16_rounds", x.astype(np.float32), "f16", x.astype(np.float32).astype(
            np.float16))
    h = r.standard_normal(20).astype(np.float16)
    cast("cast_f16_f32", h, "f32", h.astype(np.float32))
    cast("cast_f16_i32", (h * 100).astype(np.float16), "i32",
         cast_float_to_int((h * 100).astype(np.float16).astype(np.float32), np.int32))
    i = r.integers(-2**40, 2**40, (3, 4), dtype=np.int64)
    cast("cast_i64_f32", i, "f32", i.astype(np.float32))
    i = r.integers(-2**31, 2**31 - 1, (17,), dtype=np.int64).astype(np.int32)
    cast("cast_i32_i8_wraps", i, "i8", i.astype(np.int8))
    cast("cast_i32_bool", np.int32([0, 1, -1, 2**30, 0]), "bool", np.int32([0, 1, -1, 2**30, 0]) != 0)
    b = r.integers(0, 2, (2, 3)).astype(bool)
    cast("cast_bool_f32", b, "f32", b.astype(np.float32))
    u = r.integers(0, 255, (9,), dtype=np.uint8)
    cast("cast_u8_i64", u, "i64", u.astype(np.int64))
    i = r.integers(-70000, 70000, (12,), dtype=np.int32)
    cast("cast_i32_f16", i, "f16", i.astype(np.float16))
    i = r.integers(-300, 300, (5,), dtype=np.int16)
    cast("cast_i16_identity", i, "i16", i.copy())

    def expand(name, x, shape):
        add_case(name, "expand", [x], np.ascontiguousarray(np.broadcast_to(x, np.broadcast_shapes(
            x.shape, tuple(shape)))), EXACT, shape=tuple(shape), shape_sym=(0,) * len(shape))

    expand("expand_basic", randn(r, 3, 1), (2, 3, 4))
    expand("expand_ones_keep", r.integers(-5, 5, (2, 3), dtype=np.int64), (1, 1))
    expand("expand_lower_rank_target", randn(r, 2, 1, 1), (4, 5))
    expand("expand_bool", r.integers(0, 2, (1, 3)).astype(bool), (2, 1))
    expand("expand_to_empty", r.integers(0, 255, (1, 3), dtype=np.uint8), (0, 3))

    def batch_norm(name, xs, eps):
        x = randn(r, *xs)
        c = xs[1]
        scale, bias, mean = randn(r, c), randn(r, c), randn(r, c)
        var = (np.abs(randn(r, c)) + 0.1).astype(np.float32)
        shape = (1, c) + (1,) * (len(xs) - 2)
        y = ((d(x) - d(mean).reshape(shape)) / np.sqrt(d(var).reshape(shape) +
                                                       float(np.float32(eps))) *
             d(scale).reshape(shape) + d(bias).reshape(shape))
        add_case(name, "batch_norm", [x, scale, bias, mean, var], f32(y), epsilon=eps)

    batch_norm("batch_norm_nchw", (2, 3, 4, 5), 1e-5)
    batch_norm("batch_norm_rank2", (4, 6), 1e-3)
    batch_norm("batch_norm_rank3", (2, 5, 7), 1e-5)


# ---- LLM ops (sample has two outputs and is tested statistically in llm_test.cc) ------------------

def gen_llm():
    r = rng(39)
    d = lambda x: np.asarray(x, dtype=np.float64)

    def rms_norm(name, shape, eps):
        x = randn(r, *shape)
        w = (randn(r, shape[-1]) * 0.5 + 1.0).astype(np.float32)
        y = d(w) * d(x) / np.sqrt(np.mean(d(x) ** 2, axis=-1, keepdims=True) + float(np.float32(eps)))
        add_case(name, "rms_norm", [x, w], y.astype(np.float32), (1e-5, 1e-6), axis=-1, epsilon=eps)

    rms_norm("rms_norm_hidden", (3, 64), 1e-6)
    rms_norm("rms_norm_per_head", (2, 4, 16), 1e-6)  # Qwen3 q_norm / k_norm over head_dim
    rms_norm("rms_norm_one", (1, 1), 1e-5)

    def rope(name, t, heads, dim, base, positions):
        x = randn(r, t, heads, dim)
        inv_freq = (1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))).astype(np.float32)
        pos = np.array(positions, dtype=np.int32)
        angle = d(pos.astype(np.float32)[:, None] * inv_freq[None, :])  # the f32 product
        cos = np.concatenate([np.cos(angle), np.cos(angle)], axis=-1)[:, None, :]
        sin = np.concatenate([np.sin(angle), np.sin(angle)], axis=-1)[:, None, :]
        half = dim // 2
        rot = np.concatenate([-d(x)[..., half:], d(x)[..., :half]], axis=-1)
        add_case(name, "rope", [x, pos, inv_freq], (d(x) * cos + rot * sin).astype(np.float32), (1e-5, 2e-6))

    rope("rope_llama", 4, 3, 16, 500000.0, [0, 1, 17, 4095])
    rope("rope_head_dim_2", 2, 1, 2, 10000.0, [5, 123])

    g = randn(r, 3, 17) * 4
    u = randn(r, 3, 17)
    add_case("silu_mul", "silu_mul", [g, u], (d(g) / (1.0 + np.exp(-d(g))) * d(u)).astype(np.float32),
             (1e-5, 1e-6))

    ids = np.array([4, 0, 4, 2, 1], dtype=np.int32)
    w32 = randn(r, 5, 6)
    add_case("embedding_f32", "embedding", [w32, ids], w32[ids], EXACT)
    w16 = (randn(r, 5, 6) * 1000).astype(np.float16)
    w16[1, 0], w16[2, 1] = np.float16(6e-8), np.float16(np.inf)  # a subnormal, an infinity
    add_case("embedding_f16", "embedding", [w16, ids], w16[ids].astype(np.float32), EXACT)


# ---- lstm, gru (ONNX layout 0; several outputs: output=<Y>,<Y_h>[,<Y_c>]) ----------------------------

def gen_rnn():
    import rnn_numpy
    r = rng(1717)

    def case(name, kind, T, B, I, H, direction="forward", bias=True, lens=None, h0=True, c0=True, peep=False,
             acts=None, alphas=None, betas=None, clip=0.0, input_forget=0, linear_before_reset=0, drop_tail=False):
        g = 4 if kind == "lstm" else 3
        D = 2 if direction == "bidirectional" else 1
        x, w, rr = randn(r, T, B, I), randn(r, D, g * H, I) * 0.5, randn(r, D, g * H, H) * 0.5
        b = randn(r, D, 2 * g * H) * 0.5 if bias else None
        sl = None if lens is None else np.array(lens, dtype=np.int32)
        ih = randn(r, D, B, H) if h0 else None
        ic = randn(r, D, B, H) if (c0 and kind == "lstm") else None
        p = randn(r, D, 3 * H) * 0.5 if peep else None
        per = 3 if kind == "lstm" else 2
        names = acts or (["Sigmoid", "Tanh", "Tanh"] if kind == "lstm" else ["Sigmoid", "Tanh"]) * D
        resolved = rnn_numpy.resolve_activations(names, alphas, betas)
        assert len(resolved) == per * D
        outs = rnn_numpy.rnn(kind, x, w, rr, b, sl, ih, ic, p, direction, resolved, clip, input_forget,
                             linear_before_reset)
        inputs = [x, w, rr, b, sl, ih] + ([ic, p] if kind == "lstm" else [])
        if drop_tail:  # trailing absent inputs left out of the call, as a program may
            while inputs[-1] is None:
                inputs.pop()
        # Every output is written with its own file name; the manifest lists them in order.
        files = []
        for o, y in enumerate(outs):
            fname = f"{name}.out{o}.npy"
            np.save(os.path.join(OUT_DIR, fname), c_order(f32(y)))
            files.append(fname)
        attrs = dict(direction=direction, hidden_size=H, activations=[a[0] for a in resolved],
                     rnn_alpha=[a[1] for a in resolved], rnn_beta=[a[2] for a in resolved])
        if clip:
            attrs["clip"] = float(clip)
        if input_forget:
            attrs["input_forget"] = 1
        if linear_before_reset:
            attrs["linear_before_reset"] = 1
        add_case(name, kind, inputs, None, (1e-5, 2e-6), **attrs)
        cases[-1] = cases[-1].replace(f"output={name}.out.npy", "output=" + ",".join(files))

    case("lstm_forward", "lstm", 4, 3, 5, 4)
    case("lstm_reverse_no_optional", "lstm", 3, 2, 3, 5, direction="reverse", bias=False, h0=False, c0=False,
         drop_tail=True)
    case("lstm_bidirectional_lens_peephole_clip", "lstm", 5, 3, 4, 3, direction="bidirectional",
         lens=[5, 0, 2], peep=True, clip=0.9)
    case("lstm_input_forget", "lstm", 3, 2, 4, 4, input_forget=1, peep=True)
    case("lstm_activations", "lstm", 4, 2, 3, 3, direction="bidirectional",
         acts=["HardSigmoid", "Softsign", "Elu", "Sigmoid", "ScaledTanh", "LeakyRelu"],
         alphas=[0.3, 0.9, 0.7, 0.05], betas=[0.45, 1.3])
    case("lstm_seq_len_one_batch_one", "lstm", 1, 1, 2, 1)
    case("gru_forward", "gru", 4, 3, 5, 4)
    case("gru_reverse_no_optional", "gru", 3, 2, 3, 5, direction="reverse", bias=False, h0=False, drop_tail=True)
    case("gru_bidirectional_lens_linear_before_reset", "gru", 5, 3, 4, 3, direction="bidirectional",
         lens=[2, 5, 0], linear_before_reset=1, clip=1.1)
    case("gru_activations", "gru", 4, 2, 3, 4, direction="bidirectional",
         acts=["HardSigmoid", "Softplus", "ThresholdedRelu", "Affine"], alphas=[0.25, 0.1, 0.8], betas=[0.5, 0.2])
    case("gru_relu_candidate", "gru", 3, 2, 3, 3, acts=["Sigmoid", "Relu"])


# ---- issue 17: elementwise ops for ONNX models ----------------------------------------------------

def gen_elementwise_onnx():
    r = rng(1717)
    x = (randn(r, 3, 17) * 3).astype(np.float32)
    xd = d(x)
    add_case("leaky_relu", "leaky_relu", [x], f32(np.where(xd < 0, d(np.float32(0.01)) * xd, xd)),
             EXACT, alpha=0.01)
    add_case("leaky_relu_negative_alpha", "leaky_relu", [x], f32(np.where(xd < 0, -1.5 * xd, xd)), EXACT,
             alpha=-1.5)
    add_case("elu", "elu", [x], f32(np.where(xd < 0, np.expm1(xd), xd)), alpha=1.0)
    add_case("elu_alpha", "elu", [x], f32(np.where(xd < 0, d(np.float32(0.3)) * np.expm1(xd), xd)),
             alpha=0.3)
    alpha, gamma = 1.67326319217681884765625, 1.05070102214813232421875  # ONNX Selu's f32 defaults
    add_case("selu", "selu", [x], f32(gamma * np.where(xd <= 0, alpha * np.expm1(xd), xd)), alpha=alpha,
             beta=gamma)
    big = np.float32([-100.0, -30.0, -1e-3, 0.0, 1e-3, 30.0, 100.0, 1e30])
    xs = np.concatenate([x.reshape(-1), big])
    xsd = d(xs)
    with np.errstate(over="ignore"):
        sp = np.where(xsd > 0, xsd + np.log1p(np.exp(-np.abs(xsd))), np.log1p(np.exp(np.minimum(xsd, 0.0))))
    add_case("softplus", "softplus", [xs], f32(sp))
    pos = (np.abs(randn(r, 4, 9)) * 10 + 1e-3).astype(np.float32)
    pos[0, :3] = np.float32([1.0, 1e-38, 3e38])
    add_case("log", "log", [pos], f32(np.log(d(pos))))
    add_case("abs", "abs", [x], np.abs(x), EXACT)
    i32 = r.integers(-1000, 1000, (2, 7), dtype=np.int32)
    i32[0, 0] = np.iinfo(np.int32).min  # wraps to itself, as onnxruntime
    add_case("abs_i32", "abs", [i32], np.abs(i32), EXACT)
    i64 = r.integers(-2**40, 2**40, (5,), dtype=np.int64)
    add_case("abs_i64", "abs", [i64], np.abs(i64), EXACT)
    add_case("neg_i32", "neg", [i32], -i32, EXACT)
    add_case("neg_i64", "neg", [i64], -i64, EXACT)
    nz = x.copy()
    nz[0, 0] = np.float32(1e-40)  # 1 / subnormal overflows
    with np.errstate(over="ignore", divide="ignore"):
        add_case("reciprocal", "reciprocal", [nz], f32(1.0 / d(nz)), EXACT)
    halves = np.float32([-2.5, -1.5, -0.5, -0.49999997, 0.5, 1.5, 2.5, 3.5, 1e7 + 1, 8388609.0, -0.0, 0.0])
    rx = np.concatenate([x.reshape(-1), halves])
    add_case("floor", "floor", [rx], np.floor(rx), EXACT)
    add_case("ceil", "ceil", [rx], np.ceil(rx), EXACT)
    add_case("round_half_even", "round", [rx], np.round(rx), EXACT)
    ang = np.concatenate([x.reshape(-1) * 10, np.float32([1e4, -1e5, 3.14159265, 1e30])])
    add_case("sin", "sin", [ang], f32(np.sin(d(ang))))
    add_case("cos", "cos", [ang], f32(np.cos(d(ang))))

    # Comparisons: ties in about a third of the elements; broadcasting both ways.
    def tie(a, b):
        b = b.copy()
        flat_a, flat_b = a.reshape(-1), b.reshape(-1)
        flat_b[::3] = flat_a[:flat_b[::3].size]
        return b

    a = randn(r, 2, 3, 5)
    b = tie(a, randn(r, 2, 3, 5))
    ai = r.integers(-4, 4, (4, 1, 6)).astype(np.int32)
    bi = r.integers(-4, 4, (3, 1)).astype(np.int32)
    al = r.integers(-2**40, 2**40, (3, 4), dtype=np.int64)
    bl = al[1:2].copy()
    for op, fn in (("greater", np.greater), ("less", np.less), ("greater_equal", np.greater_equal),
                   ("less_equal", np.less_equal)):
        add_case(f"{op}_f32", op, [a, b], fn(a, b), EXACT)
        add_case(f"{op}_f32_broadcast", op, [a, b[:, :1, :]], fn(a, b[:, :1, :]), EXACT)
        add_case(f"{op}_i32_broadcast", op, [ai, bi], fn(ai, bi), EXACT)
        add_case(f"{op}_i64_row", op, [al, bl], fn(al, bl), EXACT)
    p = r.integers(0, 2, (3, 4)).astype(bool)
    q = r.integers(0, 2, (4,)).astype(bool)
    add_case("and_broadcast", "and", [p, q], np.logical_and(p, q), EXACT)
    add_case("or_broadcast", "or", [p, q], np.logical_or(p, q), EXACT)
    add_case("xor_broadcast", "xor", [p, q], np.logical_xor(p, q), EXACT)
    add_case("not", "not", [p], np.logical_not(p), EXACT)

    # max / min: NaN propagates; a tie returns b (so max(+0, -0) is -0, as onnxruntime).
    specials = np.float32([np.nan, 1.0, 0.0, -0.0, np.inf, -np.inf])
    ms = np.concatenate([a.reshape(-1), specials])
    mt = np.concatenate([b.reshape(-1), np.float32([1.0, np.nan, -0.0, 0.0, 2.0, -3.0])])
    add_case("max_f32", "max", [ms, mt], np.where(np.isnan(ms), ms, np.where(ms > mt, ms, mt)), EXACT)
    add_case("min_f32", "min", [ms, mt], np.where(np.isnan(ms), ms, np.where(ms < mt, ms, mt)), EXACT)
    add_case("max_f32_broadcast", "max", [a, b[0, :, :1]], np.maximum(a, b[0, :, :1]), EXACT)
    add_case("min_i32_broadcast", "min", [ai, bi], np.minimum(ai, bi), EXACT)
    add_case("max_i64", "max", [al, bl], np.maximum(al, bl), EXACT)
    add_case("min_i64_scalar", "min", [al, np.int64(7)], np.minimum(al, np.int64(7)), EXACT)

    # prelu: per-channel slope [C, 1, 1] against NCHW (torch's nn.PReLU export), a scalar slope,
    # and a slope along the last axis.
    xp = randn(r, 2, 3, 4, 5)
    slope = randn(r, 3, 1, 1)
    add_case("prelu_channel", "prelu", [xp, slope], f32(np.where(d(xp) < 0, d(slope) * d(xp), d(xp))), EXACT)
    s1 = np.float32([0.25])
    add_case("prelu_scalar", "prelu", [xp, s1], f32(np.where(d(xp) < 0, d(s1) * d(xp), d(xp))), EXACT)
    s5 = randn(r, 5)
    add_case("prelu_last_axis", "prelu", [xp, s5], f32(np.where(d(xp) < 0, d(s5) * d(xp), d(xp))), EXACT)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    gen_elementwise()
    gen_linalg()
    gen_conv_pool()
    gen_norm()
    gen_movement()
    gen_importer_ops()
    gen_llm()
    # [issue 17: elementwise ops]
    gen_elementwise_onnx()

    # [issue 17: reductions and index ops]
    golden_reduce_index.generate(sys.modules[__name__])

    # [issue 17: resize, conv_transpose2d]
    import golden_spatial
    golden_spatial.gen(add_case, randn, rng, F32_TOL, EXACT)

    # [issue 17: lstm, gru]
    gen_rnn()

    with open(os.path.join(OUT_DIR, "manifest.txt"), "w", newline="\n") as f:
        f.write("# Generated by tests/kernels/reference/make_golden.py; do not edit.\n")
        for line in cases:
            f.write(line + "\n")
    print(f"{len(cases)} cases written to {OUT_DIR}", file=sys.stderr)


if __name__ == "__main__":
    main()
