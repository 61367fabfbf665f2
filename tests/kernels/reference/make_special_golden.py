#!/usr/bin/env python3
"""NaN / ±Inf / ±0 / huge / tiny golden data for the reference kernels, from PyTorch and onnxruntime.

Every f32 op of kernels/reference/ is evaluated on inputs full of special values twice: with PyTorch
(torch 1.13, CPU) and with onnxruntime (1.22, a one-node ONNX model per op; a two-node one for silu
= x * Sigmoid(x)). The expected output written for the C++ test is chosen per op (ONNX semantics
unless the op says otherwise, see POLICY below), and every element where the two runtimes disagree
is recorded in torch_vs_onnxruntime.md. Run with the project's venv:

    .venv/bin/python tests/kernels/reference/make_special_golden.py

Writes tests/data/golden_special/: <case>.in<i>.npy, <case>.out.npy, manifest.txt (the format of
tests/data/golden/manifest.txt, read by reference_test.cc's SpecialValues suite) and
torch_vs_onnxruntime.md. The comparison in the C++ test: NaN matches any NaN, an infinity only the
same infinity, a zero expected where the chosen runtime gave a zero must come out as a zero of the
same sign, everything else within rtol / atol. Inputs are fixed (no randomness): a rerun rewrites
identical .npy bytes for the same torch / onnxruntime versions.
"""

import math
import os
import sys

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")  # onnx vs Debian protobuf

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "data", "golden_special"))
OPSET = 20  # Gelu needs 20

NAN, INF = float("nan"), float("inf")
F32_MAX = float(np.finfo(np.float32).max)
DENORM = float(np.float32(1e-40))  # subnormal
TINY = float(np.finfo(np.float32).tiny)

# The special values every unary op sees (and their pairs for the binary ops).
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, -3.0, 6.0, 7.5, 20.0, -20.0,
           88.5, 89.0, -104.0, -110.0, 1e30, -1e30, F32_MAX, -F32_MAX, DENORM, -DENORM, TINY, 1e-7]
PAIR_VALUES = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -3.0, F32_MAX, DENORM]

F32_TOL = (1e-5, 1e-6)
EXACT = (0.0, 0.0)

cases = []      # manifest lines
records = []    # markdown sections: disagreements between torch and onnxruntime


def f32(x):
    return np.asarray(x, dtype=np.float32)


def fmt_value(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return ",".join(fmt_value(x) for x in v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def add_case(name, op, inputs, output, tol=F32_TOL, **attrs):
    names = []
    for i, x in enumerate(inputs):
        fname = f"{name}.in{i}.npy"
        np.save(os.path.join(OUT_DIR, fname), np.array(x, order="C", copy=True))
        names.append(fname)
    out_name = f"{name}.out.npy"
    np.save(os.path.join(OUT_DIR, out_name), np.array(output, order="C", copy=True))
    tokens = [f"name={name}", f"op={op}", "inputs=" + ",".join(names), f"output={out_name}",
              f"rtol={tol[0]!r}", f"atol={tol[1]!r}"]
    for key in sorted(attrs):
        tokens.append(f"{key}={fmt_value(attrs[key])}")
    cases.append(" ".join(tokens))


# ---- onnxruntime ---------------------------------------------------------------------------------

NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.bool_): TensorProto.BOOL,
              np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8,
              np.dtype(np.int16): TensorProto.INT16, np.dtype(np.int32): TensorProto.INT32,
              np.dtype(np.int64): TensorProto.INT64, np.dtype(np.float16): TensorProto.FLOAT16}


def run_onnx(nodes, inputs, out_dtype=TensorProto.FLOAT, initializers=()):
    """Runs a graph of `nodes` (helper.make_node) with graph inputs x0, x1, .. and output y."""
    graph_inputs = [helper.make_tensor_value_info(f"x{i}", NP_TO_ONNX[np.asarray(a).dtype], list(np.shape(a)))
                    for i, a in enumerate(inputs)]
    graph = helper.make_graph(nodes, "special", graph_inputs,
                              [helper.make_tensor_value_info("y", out_dtype, None)],
                              initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {f"x{i}": np.asarray(a) for i, a in enumerate(inputs)})[0]


def onnx1(op_type, inputs, out_dtype=TensorProto.FLOAT, initializers=(), extra_inputs=(), **attrs):
    names = [f"x{i}" for i in range(len(inputs))] + list(extra_inputs)
    return run_onnx([helper.make_node(op_type, names, ["y"], **attrs)], inputs, out_dtype, initializers)


def const(name, value):
    return helper.make_tensor(name, TensorProto.FLOAT, [], [float(value)])


# ---- comparison and record -----------------------------------------------------------------------

def same(a, b, tol):
    """Elementwise: NaN == NaN, infinities exact, zeros by sign, else within tol."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    with np.errstate(invalid="ignore"):
        close = np.abs(a - b) <= tol[1] + tol[0] * np.abs(b)
    inf = np.isinf(a) | np.isinf(b)
    close = np.where(inf, a == b, close)
    zeros = (a == 0) & (b == 0)
    close = np.where(zeros, np.signbit(a) == np.signbit(b), close)
    return both_nan | (close & ~np.isnan(a) & ~np.isnan(b))


def show(v):
    if isinstance(v, (np.bool_, bool)):
        return str(bool(v))
    if isinstance(v, (np.integer, int)):
        return str(int(v))
    v = float(v)
    if math.isnan(v):
        return "nan"
    if v == 0:
        return "-0" if math.copysign(1, v) < 0 else "0"
    return f"{v:.9g}"


def record(name, torch_out, onnx_out, inputs_text, chosen, tol=F32_TOL):
    """Lists the elements where torch and onnxruntime disagree; returns nothing."""
    t = np.asarray(torch_out).reshape(-1)
    o = np.asarray(onnx_out).reshape(-1)
    if t.dtype.kind == "f" or o.dtype.kind == "f":
        diff = ~same(t.astype(np.float64), o.astype(np.float64), tol)
    else:
        diff = t != o
    rows = [f"| {inputs_text(i)} | {show(t[i])} | {show(o[i])} |" for i in np.flatnonzero(diff)]
    if not rows:
        return
    records.append(f"### {name}\n\nEmber follows **{chosen}**.\n\n| input | torch | onnxruntime |\n|---|---|---|\n"
                   + "\n".join(rows) + "\n")


def choose(policy, torch_out, onnx_out):
    return np.asarray(onnx_out if policy == "onnxruntime" else torch_out)


# ---- elementwise ---------------------------------------------------------------------------------

def gen_unary():
    x = f32(SPECIAL)
    xt = torch.from_numpy(x.copy())
    sixth = 1.0 / 6.0
    # (case, ember op, torch fn, onnx graph fn, policy, tolerance, ember attrs)
    table = [
        ("relu", "relu", torch.relu, lambda a: onnx1("Relu", [a]), "onnxruntime", EXACT, {}),
        ("gelu_erf", "gelu", lambda t: torch.nn.functional.gelu(t),
         lambda a: onnx1("Gelu", [a]), "onnxruntime", F32_TOL, {"approx": "none"}),
        ("gelu_tanh", "gelu", lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
         lambda a: onnx1("Gelu", [a], approximate="tanh"), "onnxruntime", F32_TOL, {"approx": "tanh"}),
        ("silu", "silu", torch.nn.functional.silu,
         lambda a: run_onnx([helper.make_node("Sigmoid", ["x0"], ["s"]), helper.make_node("Mul", ["x0", "s"], ["y"])], [a]),
         "onnxruntime", F32_TOL, {}),
        ("sigmoid", "sigmoid", torch.sigmoid, lambda a: onnx1("Sigmoid", [a]), "onnxruntime", F32_TOL, {}),
        ("tanh", "tanh", torch.tanh, lambda a: onnx1("Tanh", [a]), "onnxruntime", F32_TOL, {}),
        # onnxruntime's Erf returns 1 for NaN (its polynomial clamps first): a NaN must stay NaN.
        ("erf", "erf", torch.erf, lambda a: onnx1("Erf", [a]), "torch", F32_TOL, {}),
        ("sqrt", "sqrt", torch.sqrt, lambda a: onnx1("Sqrt", [a]), "onnxruntime", F32_TOL, {}),
        ("exp", "exp", torch.exp, lambda a: onnx1("Exp", [a]), "onnxruntime", F32_TOL, {}),
        ("neg", "neg", torch.neg, lambda a: onnx1("Neg", [a]), "onnxruntime", EXACT, {}),
        ("clip_relu6", "clip", lambda t: torch.clamp(t, 0.0, 6.0),
         lambda a: onnx1("Clip", [a], initializers=[const("lo", 0.0), const("hi", 6.0)], extra_inputs=["lo", "hi"]),
         "onnxruntime", EXACT, {"clip_min": 0.0, "clip_max": 6.0}),
        # ONNX: an absent max is numeric_limits<float>::max(), so +Inf becomes FLT_MAX; the kernel
        # gets that bound as its attribute.
        ("clip_unbounded_max", "clip", lambda t: torch.clamp(t, min=-1.0),
         lambda a: onnx1("Clip", [a], initializers=[const("lo", -1.0)], extra_inputs=["lo"]),
         "onnxruntime", EXACT, {"clip_min": -1.0, "clip_max": F32_MAX}),
        ("hard_sigmoid", "hard_sigmoid", torch.nn.functional.hardsigmoid,
         lambda a: onnx1("HardSigmoid", [a], alpha=sixth, beta=0.5), "onnxruntime", F32_TOL,
         {"alpha": float(np.float32(sixth)), "beta": 0.5}),
        ("hard_swish", "hard_swish", torch.nn.functional.hardswish,
         lambda a: onnx1("HardSwish", [a]), "onnxruntime", F32_TOL, {}),
    ]
    for name, op, tfn, ofn, policy, tol, attrs in table:
        t = tfn(xt).numpy()
        o = ofn(x)
        chosen = choose(policy, t, o)
        record(name, t, o, lambda i: show(x[i]), policy)
        add_case(f"special_{name}", op, [x], chosen.astype(np.float32), tol, **attrs)


def pairs():
    v = f32(PAIR_VALUES)
    a = np.repeat(v, len(v))
    b = np.tile(v, len(v))
    return a, b


def gen_binary():
    a, b = pairs()
    at, bt = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
    text = lambda i: f"{show(a[i])}, {show(b[i])}"
    for name, tfn, onnx_op in [("add", torch.add, "Add"), ("sub", torch.sub, "Sub"),
                               ("mul", torch.mul, "Mul"), ("div", torch.div, "Div"),
                               ("pow", torch.pow, "Pow")]:
        t = tfn(at, bt).numpy()
        o = onnx1(onnx_op, [a, b])
        record(name, t, o, text, "onnxruntime")
        add_case(f"special_{name}", name, [a, b], o.astype(np.float32), EXACT if name != "pow" else F32_TOL)
    t = torch.eq(at, bt).numpy()
    o = onnx1("Equal", [a, b], TensorProto.BOOL)
    record("equal", t, o, text, "onnxruntime")
    add_case("special_equal", "equal", [a, b], o, EXACT)
    # where: the selected value's bytes, NaN payload included.
    cond = np.array([True, False] * (len(a) // 2), dtype=np.bool_)
    t = torch.where(torch.from_numpy(cond), at, bt).numpy()
    o = onnx1("Where", [cond, a, b])
    record("where", t, o, lambda i: f"{cond[i]}, {show(a[i])}, {show(b[i])}",
           "torch (the selected element's bytes, so -0 stays -0)")
    add_case("special_where", "where", [cond, a, b], t, EXACT)


# ---- cast ----------------------------------------------------------------------------------------

def ember_float_to_int(x, dtype):
    """Ember's Cast rule: truncate toward zero, NaN -> 0, out of range saturates (±Inf included)."""
    info = np.iinfo(dtype)
    x = np.asarray(x, dtype=np.float64)
    out = np.where(np.isnan(x), 0.0, np.trunc(np.clip(np.nan_to_num(x, nan=0.0, posinf=info.max, neginf=info.min),
                                                       info.min, info.max)))
    return np.array([dtype(int(v)) if abs(v) < 2**63 else (info.max if v > 0 else info.min) for v in out],
                    dtype=dtype)


def gen_cast():
    x = f32(SPECIAL + [127.9, -128.9, 255.5, 300.0, -1.5, 2147483520.0, 3e9, -3e9, 9.3e18, -9.3e18])
    xt = torch.from_numpy(x.copy())
    text = lambda i: show(x[i])
    for name, dtype, tdtype, odtype in [("i8", np.int8, torch.int8, TensorProto.INT8),
                                        ("u8", np.uint8, torch.uint8, TensorProto.UINT8),
                                        ("i16", np.int16, torch.int16, TensorProto.INT16),
                                        ("i32", np.int32, torch.int32, TensorProto.INT32),
                                        ("i64", np.int64, torch.int64, TensorProto.INT64)]:
        with np.errstate(invalid="ignore"):
            t = xt.to(tdtype).numpy()
        o = onnx1("Cast", [x], odtype, to=odtype)
        e = ember_float_to_int(x, dtype)
        record(f"cast f32 -> {name}", t, o, text,
               "neither: truncation toward zero, NaN -> 0, saturation at the type's range (C++ leaves "
               "these conversions undefined; both runtimes give what the x86 instruction happens to give)")
        # Ember differs from both here, by choice: listed too.
        rows = [f"| {show(x[i])} | {show(t[i])} | {show(o[i])} | {show(e[i])} |"
                for i in range(len(x)) if e[i] != o[i] or e[i] != t[i]]
        if rows:
            records.append(f"### cast f32 -> {name}: Ember's saturating rule vs both\n\n"
                           "| input | torch | onnxruntime | Ember |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")
        add_case(f"special_cast_{name}", "cast", [x], e, EXACT, to=name)
    t = xt.to(torch.bool).numpy()
    o = onnx1("Cast", [x], TensorProto.BOOL, to=TensorProto.BOOL)
    record("cast f32 -> bool", t, o, text, "onnxruntime")
    add_case("special_cast_bool", "cast", [x], o, EXACT, to="bool")
    t = xt.to(torch.float16).numpy()
    o = onnx1("Cast", [x], TensorProto.FLOAT16, to=TensorProto.FLOAT16)
    record("cast f32 -> f16", t.astype(np.float32), o.astype(np.float32), text, "onnxruntime", EXACT)
    add_case("special_cast_f16", "cast", [x], o, F32_TOL if False else EXACT, to="f16")


# ---- reductions, softmax, norms -------------------------------------------------------------------

ROWS = [
    [1.0, NAN, 2.0, 3.0],
    [NAN, 1.0, 2.0, 3.0],
    [INF, 1.0, 2.0, 3.0],
    [-INF, 1.0, 2.0, 3.0],
    [INF, -INF, 1.0, 2.0],
    [INF, INF, 1.0, 2.0],
    [-INF, -INF, -INF, -INF],
    [-INF, -INF, 0.0, -INF],
    [-0.0, -0.0, -0.0, -0.0],
    [F32_MAX, F32_MAX, -1.0, 1.0],
    [1e30, -1e30, 1.0, 2.0],
    [DENORM, -DENORM, DENORM, 0.0],
    [5.0, 5.0, 5.0, 5.0],
    [1.0, 2.0, 3.0, 4.0],
]


def row_text(x):
    return lambda i: "row [" + ", ".join(show(v) for v in x[i // x.shape[1]]) + "]"


def gen_reduce_softmax():
    x = f32(ROWS)
    xt = torch.from_numpy(x.copy())
    text = lambda i: "row [" + ", ".join(show(v) for v in x[i]) + "]"
    for name, tfn, onnx_op in [("reduce_sum", lambda t: torch.sum(t, dim=1, keepdim=True), "ReduceSum"),
                               ("reduce_mean", lambda t: torch.mean(t, dim=1, keepdim=True), "ReduceMean")]:
        t = tfn(xt).numpy()
        axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
        o = onnx1(onnx_op, [x], initializers=[axes], extra_inputs=["axes"], keepdims=1)
        # The IEEE sum of the elements (a sum of -0 is -0, as onnxruntime), computed exactly: Ember
        # sums in double, so [1e30, -1e30, 1, 2] gives 3 (as torch; onnxruntime's f32 sum loses it).
        with np.errstate(invalid="ignore"):
            e = np.add.reduce(x.astype(np.float64), axis=1, keepdims=True, initial=-0.0)
        if name == "reduce_mean":
            e = e / x.shape[1]
        with np.errstate(over="ignore"):
            e = e.astype(np.float32)
        record(name, t, o, text, "neither exactly: the IEEE sum, exact (signs of zero as onnxruntime, "
               "the cancellation as torch)")
        add_case(f"special_{name}", name, [x], e.astype(np.float32), F32_TOL, axes=[1], keepdims=True)

    t = torch.softmax(xt, dim=1).numpy()
    o = onnx1("Softmax", [x], axis=1)
    record("softmax (last axis)", t, o, row_text(x), "onnxruntime")
    add_case("special_softmax", "softmax", [x], o, F32_TOL, axis=1)
    xc = np.ascontiguousarray(x.T)  # the same rows as columns: softmax over axis 0
    t = torch.softmax(torch.from_numpy(xc.copy()), dim=0).numpy()
    o = onnx1("Softmax", [xc], axis=0)
    record("softmax (axis 0)", t, o, lambda i: f"column {i % xc.shape[1]}", "onnxruntime")
    add_case("special_softmax_axis0", "softmax", [xc], o, F32_TOL, axis=0)

    # layer_norm over the last axis, gamma and beta given. Rows whose f32 sums overflow are left out:
    # Ember's reference sums in double (finite there), torch and onnxruntime in f32 (NaN).
    x = f32([r for r in ROWS if max(abs(v) for v in r) < 1e20 or math.isinf(max(abs(v) for v in r))])
    xt = torch.from_numpy(x.copy())
    gamma = f32([1.0, 0.5, 2.0, -1.0])
    beta = f32([0.0, 1.0, -1.0, 0.25])
    eps = 1e-5
    t = torch.nn.functional.layer_norm(xt, (4,), torch.from_numpy(gamma.copy()), torch.from_numpy(beta.copy()),
                                       eps).numpy()
    o = onnx1("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)
    record("layer_norm", t, o, row_text(x), "onnxruntime")
    add_case("special_layer_norm", "layer_norm", [x, gamma, beta], o, (1e-4, 1e-5), axis=-1, epsilon=eps)

    # rms_norm: no ONNX op in opset 20; torch in the HF LlamaRMSNorm form (f32).
    w = f32([1.0, 0.5, 2.0, -1.0])
    var = xt.pow(2).mean(-1, keepdim=True)
    t = (torch.from_numpy(w.copy()) * (xt * torch.rsqrt(var + 1e-6))).numpy()
    add_case("special_rms_norm", "rms_norm", [x, w], t, (1e-5, 1e-6), axis=-1, epsilon=1e-6)


def gen_batch_norm():
    x = f32(SPECIAL[:24]).reshape(1, 3, 2, 4)
    scale = f32([1.0, 0.0, -2.0])
    bias = f32([0.5, 1.0, 0.0])
    mean = f32([0.0, 1.0, -1.0])
    var = f32([1.0, 4.0, 0.0])
    eps = 1e-5
    t = torch.nn.functional.batch_norm(torch.from_numpy(x.copy()), torch.from_numpy(mean.copy()),
                                       torch.from_numpy(var.copy()), torch.from_numpy(scale.copy()),
                                       torch.from_numpy(bias.copy()), False, 0.0, eps).numpy()
    o = onnx1("BatchNormalization", [x, scale, bias, mean, var], epsilon=eps)
    xf = x.reshape(-1)
    record("batch_norm", t, o, lambda i: f"x = {show(xf[i])}, channel {i // 8}", "onnxruntime")
    add_case("special_batch_norm", "batch_norm", [x, scale, bias, mean, var], o, F32_TOL, epsilon=eps)


# ---- pooling -------------------------------------------------------------------------------------

def gen_pool():
    # 1 x 4 x 2 x 4 planes; 2x2 windows, stride 2: each window holds one special pattern.
    x = f32([
        [[NAN, 1.0, 2.0, NAN], [3.0, 4.0, 5.0, 6.0]],
        [[1.0, 2.0, INF, -INF], [3.0, 4.0, 1.0, 1.0]],
        [[-INF, -INF, INF, 1.0], [-INF, -INF, NAN, -INF]],
        [[-0.0, -0.0, 1e30, 1e30], [-0.0, -0.0, -1e30, 2.0]],  # no f32 overflow: Ember sums in double
    ]).reshape(1, 4, 2, 4)
    xt = torch.from_numpy(x.copy())
    text = lambda i: f"plane {i // 2}, window {i % 2}"
    t = torch.nn.functional.max_pool2d(xt, 2, 2).numpy()
    o = onnx1("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    record("max_pool2d", t, o, text, "torch (NaN in the window gives NaN: the brief's rule, and "
           "numpy / torch.maximum semantics)")
    add_case("special_max_pool2d", "max_pool2d", [x], t, EXACT, kernel=[2, 2], stride=[2, 2],
             padding=[0, 0, 0, 0], dilation=[1, 1])
    t = torch.nn.functional.avg_pool2d(xt, 2, 2).numpy()
    o = onnx1("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    record("avg_pool2d", t, o, text, "onnxruntime")
    add_case("special_avg_pool2d", "avg_pool2d", [x], o, F32_TOL, kernel=[2, 2], stride=[2, 2],
             padding=[0, 0, 0, 0], dilation=[1, 1])
    t = torch.mean(xt, dim=(2, 3), keepdim=True).numpy()
    o = onnx1("GlobalAveragePool", [x])
    record("global_avg_pool2d", t, o, lambda i: f"plane {i}", "onnxruntime")
    add_case("special_global_avg_pool2d", "global_avg_pool2d", [x], o, F32_TOL)


# ---- matmul / linear / conv: NaN and Inf through the accumulation ----------------------------------

def gen_linalg():
    a = f32([[1.0, 2.0, 3.0], [NAN, 0.0, 0.0], [INF, 1.0, 0.0], [INF, -INF, 0.0], [0.0, 0.0, 0.0],
             [F32_MAX, F32_MAX, 0.0]])
    # No cancellation after an f32 overflow (Ember's reference accumulates in double).
    b = f32([[1.0, 0.0, 2.0, 0.0], [1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, INF]])
    t = torch.matmul(torch.from_numpy(a.copy()), torch.from_numpy(b.copy())).numpy()
    o = onnx1("MatMul", [a, b])
    record("matmul", t, o, lambda i: f"row {i // 4}, column {i % 4}", "onnxruntime")
    add_case("special_matmul", "matmul", [a, b], o, F32_TOL)
    w = np.ascontiguousarray(b.T)
    bias = f32([0.0, NAN, 1.0, -1.0])
    t = torch.nn.functional.linear(torch.from_numpy(a.copy()), torch.from_numpy(w.copy()),
                                   torch.from_numpy(bias.copy())).numpy()
    o = onnx1("Gemm", [a, w, bias], transB=1)
    record("linear", t, o, lambda i: f"row {i // 4}, column {i % 4}", "onnxruntime")
    add_case("special_linear", "linear", [a, w, bias], o, F32_TOL)
    # conv: a 1x1x3x3 input with one NaN and one Inf, 2x2 kernel of zeros and ones.
    x = f32([[[[1.0, 2.0, NAN], [3.0, INF, 4.0], [5.0, 6.0, 7.0]]]])
    k = f32([[[[1.0, 0.0], [0.0, 1.0]]], [[[0.0, 0.0], [0.0, 0.0]]]])
    t = torch.nn.functional.conv2d(torch.from_numpy(x.copy()), torch.from_numpy(k.copy())).numpy()
    o = onnx1("Conv", [x, k])
    record("conv2d", t, o, lambda i: f"output {i}", "onnxruntime")
    add_case("special_conv2d", "conv2d", [x, k], o, F32_TOL, stride=[1, 1], padding=[0, 0, 0, 0],
             dilation=[1, 1], groups=1)


def gen_silu_mul():
    g = f32(SPECIAL)
    u = f32([2.0, 1.0, 1.0, 1.0, 1.0, 0.0, NAN] + [1.0] * (len(SPECIAL) - 7))
    t = (torch.nn.functional.silu(torch.from_numpy(g.copy())) * torch.from_numpy(u.copy())).numpy()
    add_case("special_silu_mul", "silu_mul", [g, u], t, F32_TOL)


# ---- issue 17: elementwise ops for ONNX models ----------------------------------------------------

def gen_elementwise_onnx():
    x = f32(SPECIAL + [2.5, 1.5, -0.5, -1.5, 0.49999997, -1e-20, 1e4])
    xt = torch.from_numpy(x.copy())
    alpha, gamma = 1.67326319217681884765625, 1.05070102214813232421875
    # (case, ember op, torch fn, onnx fn, policy, tolerance, ember attrs)
    table = [
        ("leaky_relu", "leaky_relu", lambda t: torch.nn.functional.leaky_relu(t, 0.01),
         lambda a: onnx1("LeakyRelu", [a], alpha=0.01), "onnxruntime", EXACT, {"alpha": 0.01}),
        # elu(-0) = -0 (x < 0 selects x). Near 0 Ember computes expm1 (elu(-1e-20) = -5e-21 as torch;
        # onnxruntime's f32 exp(x) - 1 gives 0): within the tolerance either way.
        ("elu", "elu", lambda t: torch.nn.functional.elu(t, 0.5), lambda a: onnx1("Elu", [a], alpha=0.5),
         "onnxruntime", F32_TOL, {"alpha": 0.5}),
        # torch's selu has ONNX's default alpha and gamma; both runtimes give selu(-0) = +0.
        ("selu", "selu", torch.selu, lambda a: onnx1("Selu", [a]), "onnxruntime", F32_TOL,
         {"alpha": alpha, "beta": gamma}),
        ("softplus", "softplus", lambda t: torch.nn.functional.softplus(t, beta=1.0, threshold=1e30),
         lambda a: onnx1("Softplus", [a]), "onnxruntime", F32_TOL, {}),
        ("log", "log", torch.log, lambda a: onnx1("Log", [a]), "onnxruntime", F32_TOL, {}),
        ("abs", "abs", torch.abs, lambda a: onnx1("Abs", [a]), "onnxruntime", EXACT, {}),
        ("reciprocal", "reciprocal", torch.reciprocal, lambda a: onnx1("Reciprocal", [a]), "onnxruntime", EXACT, {}),
        ("floor", "floor", torch.floor, lambda a: onnx1("Floor", [a]), "onnxruntime", EXACT, {}),
        ("ceil", "ceil", torch.ceil, lambda a: onnx1("Ceil", [a]), "onnxruntime", EXACT, {}),
        ("round", "round", torch.round, lambda a: onnx1("Round", [a]), "onnxruntime", EXACT, {}),
        ("sin", "sin", torch.sin, lambda a: onnx1("Sin", [a]), "onnxruntime", F32_TOL, {}),
        ("cos", "cos", torch.cos, lambda a: onnx1("Cos", [a]), "onnxruntime", F32_TOL, {}),
    ]
    for name, op, tfn, ofn, policy, tol, attrs in table:
        t = tfn(xt).numpy()
        o = ofn(x)
        chosen = choose(policy, t, o)
        record(name, t, o, lambda i: show(x[i]), policy, tol if tol != EXACT else F32_TOL)
        add_case(f"special_{name}", op, [x], chosen.astype(np.float32), tol, **attrs)

    a, b = pairs()
    at, bt = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
    text = lambda i: f"{show(a[i])}, {show(b[i])}"
    for name, tfn, onnx_op in [("max", torch.maximum, "Max"), ("min", torch.minimum, "Min")]:
        t = tfn(at, bt).numpy()
        o = onnx1(onnx_op, [a, b])
        record(name, t, o, text, "onnxruntime (NaN wins; a tie of +0 and -0 gives the second operand)")
        add_case(f"special_{name}", name, [a, b], o, EXACT)
    for name, tfn, onnx_op in [("greater", torch.gt, "Greater"), ("less", torch.lt, "Less"),
                               ("greater_equal", torch.ge, "GreaterOrEqual"),
                               ("less_equal", torch.le, "LessOrEqual")]:
        t = tfn(at, bt).numpy()
        o = onnx1(onnx_op, [a, b], TensorProto.BOOL)
        record(name, t, o, text, "onnxruntime")
        add_case(f"special_{name}", name, [a, b], o, EXACT)
    # prelu(x, slope) over every pair. Ember selects, x < 0 ? slope x : x (ONNX's definition);
    # onnxruntime computes it arithmetically (NaN for x = ±inf and wherever the slope is NaN), torch
    # as x > 0 ? x : slope x (NaN for x = ±0 with an infinite slope).
    t = torch.nn.functional.prelu(at.reshape(1, -1), bt).reshape(-1).numpy()
    o = onnx1("PRelu", [a, b])
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.where(a < 0, a * b, a).astype(np.float32)
    record("prelu", t, o, text, "neither: x < 0 ? slope x : x (the select of ONNX's definition)")
    rows = [f"| {text(i)} | {show(t[i])} | {show(o[i])} | {show(e[i])} |"
            for i in range(len(a)) if not (same(e[i:i + 1], o[i:i + 1], F32_TOL)[0] and same(e[i:i + 1], t[i:i + 1], F32_TOL)[0])]
    if rows:
        records.append("### prelu: Ember's select vs both\n\n| x, slope | torch | onnxruntime | Ember |\n|---|---|---|---|\n"
                       + "\n".join(rows) + "\n")
    add_case("special_prelu", "prelu", [a, b], e, EXACT)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    for name in os.listdir(OUT_DIR):
        if name.endswith(".npy"):
            os.remove(os.path.join(OUT_DIR, name))
    gen_unary()
    gen_binary()
    gen_cast()
    gen_reduce_softmax()
    gen_batch_norm()
    gen_pool()
    gen_linalg()
    gen_silu_mul()
    gen_elementwise_onnx()
    with open(os.path.join(OUT_DIR, "manifest.txt"), "w", newline="\n") as f:
        f.write("# Generated by tests/kernels/reference/make_special_golden.py; do not edit.\n")
        for line in cases:
            f.write(line + "\n")
    with open(os.path.join(OUT_DIR, "torch_vs_onnxruntime.md"), "w", newline="\n") as f:
        f.write("# Special values: where PyTorch and onnxruntime disagree\n\n"
                f"Generated by tests/kernels/reference/make_special_golden.py (torch {torch.__version__}, "
                f"onnxruntime {ort.__version__}, CPU, ONNX opset {OPSET}); do not edit. Every other "
                "element of every case agrees (NaN = NaN, zeros by sign, rtol 1e-5). The golden data "
                "holds the side named under each table; kernels/reference/README.md explains the choices.\n\n")
        f.write("\n".join(records))
    print(f"{len(cases)} cases, {len(records)} ops with disagreements, written to {OUT_DIR}", file=sys.stderr)


if __name__ == "__main__":
    main()
