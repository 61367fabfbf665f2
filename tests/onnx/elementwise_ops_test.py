#!/usr/bin/env python3
"""The issue-17 elementwise ONNX ops through Ember, against onnxruntime (one ctest).

  .venv/bin/python tests/onnx/elementwise_ops_test.py --exporter EXPORTER --runner RUNNER --work DIR [-k NAME]

Every case is a small graph made with onnx.helper (every op, every attribute, default and explicit,
opsets 13 and 18+, broadcasting, variadic Max / Min / Sum / Mean with 1..4 inputs, integer and bool
dtypes, NaN / ±Inf / ±0 in the inputs). Each is exported with `exporter`, run with `runner` and compared
with onnxruntime on the same inputs: bool / integer outputs exactly, f32 elementwise within
1e-6 + 2e-6 |x| (NaN where onnxruntime has NaN, the same infinities), except the documented
differences (kernels/reference/README.md) that a case lists in `skip` (a mask of elements).
The refusal cases check that the export fails with exit status 1 and a message naming the node and
the reason. Prints one line per case; the last line is PASS or FAIL with the failing cases.
"""
import argparse
import os
import shutil
import subprocess
import sys

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")  # onnx vs Debian protobuf

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP, helper

NAN, INF = np.nan, np.inf
SPECIAL = np.float32([NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.5, -0.5, 1.5, 20.0, -20.0, 88.5,
                      -104.0, 1e30, -1e30, 3.4028235e38, 1e-40, -1e-40, 1e-20, -1e-20, 1e4])
ONNX_TYPE = {np.dtype(np.float32): TP.FLOAT, np.dtype(np.int32): TP.INT32, np.dtype(np.int64): TP.INT64,
             np.dtype(np.bool_): TP.BOOL, np.dtype(np.int8): TP.INT8, np.dtype(np.float64): TP.DOUBLE}


def rng(seed):
    return np.random.default_rng(seed)


def randf(r, *shape, scale=3.0):
    return (r.standard_normal(shape) * scale).astype(np.float32)


class Case:
    def __init__(self, name, op, inputs, attrs=None, opset=17, n_inputs=None, init=None, out_type=None,
                 expect_error=None, skip=None, nodes=None):
        self.name, self.op, self.inputs, self.attrs = name, op, inputs, attrs or {}
        self.opset, self.init, self.out_type = opset, init or {}, out_type
        self.expect_error, self.skip, self.nodes = expect_error, skip, nodes

    def model(self):
        ins = [helper.make_tensor_value_info(k, ONNX_TYPE[v.dtype], list(v.shape)) for k, v in self.inputs.items()]
        inits = [onnx.numpy_helper.from_array(v, k) for k, v in self.init.items()]
        nodes = self.nodes or [helper.make_node(self.op, list(self.inputs) + list(self.init), ["y"],
                                                name=f"{self.name}_node", **self.attrs)]
        out_type = self.out_type if self.out_type is not None else ins[0].type.tensor_type.elem_type
        graph = helper.make_graph(nodes, self.name, ins, [helper.make_tensor_value_info("y", out_type, None)],
                                  initializer=inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 8
        return m


def cases():
    r = rng(17)
    out = []
    x = randf(r, 2, 3, 4)
    xs = np.concatenate([SPECIAL, randf(r, 40)])
    # Activations with their attributes: default, explicit, negative / large.
    for op, variants in (("LeakyRelu", [{}, {"alpha": 0.2}, {"alpha": -1.5}]),
                         ("Elu", [{}, {"alpha": 0.5}, {"alpha": 2.0}]),
                         ("Selu", [{}, {"alpha": 2.0, "gamma": 0.5}, {"gamma": 3.0}])):
        for k, attrs in enumerate(variants):
            out.append(Case(f"{op.lower()}_{k}", op, {"x": x}, attrs))
            out.append(Case(f"{op.lower()}_{k}_special", op, {"x": xs}, attrs))
    for op in ("Softplus", "Log", "Abs", "Reciprocal", "Floor", "Ceil", "Round", "Sin", "Cos"):
        out.append(Case(f"{op.lower()}", op, {"x": x}))
        out.append(Case(f"{op.lower()}_special", op, {"x": xs}))
        out.append(Case(f"{op.lower()}_opset13", op, {"x": x}, opset=13))
    halves = np.float32([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.49999997, 0.49999997, 8388609.0])
    out.append(Case("round_half_even", "Round", {"x": halves}))
    out.append(Case("log_positive", "Log", {"x": np.abs(x) + np.float32(1e-3)}))
    i32 = r.integers(-1000, 1000, (3, 5)).astype(np.int32)
    i32[0, 0] = np.iinfo(np.int32).min
    i64 = r.integers(-2**40, 2**40, (7,)).astype(np.int64)
    out.append(Case("abs_i32", "Abs", {"x": i32}))
    out.append(Case("abs_i64", "Abs", {"x": i64}))
    out.append(Case("neg_i32", "Neg", {"x": i32}))
    out.append(Case("neg_i64", "Neg", {"x": i64}))

    # PRelu: torch's per-channel slope [C, 1, 1], a scalar, the last axis, a run-time slope. Ember
    # selects (x < 0 ? slope x : x); onnxruntime gives NaN for x = ±inf (skipped).
    xp = randf(r, 2, 3, 4, 5)
    out.append(Case("prelu_channel", "PRelu", {"x": xp}, init={"slope": randf(r, 3, 1, 1, scale=0.5)}))
    out.append(Case("prelu_scalar", "PRelu", {"x": xp}, init={"slope": np.float32([0.25])}))
    out.append(Case("prelu_last_axis", "PRelu", {"x": xp}, init={"slope": randf(r, 5)}))
    out.append(Case("prelu_runtime_slope", "PRelu", {"x": xp, "slope": randf(r, 4, 1)}))
    out.append(Case("prelu_special", "PRelu", {"x": xs}, init={"slope": np.float32([0.3])},
                    skip=np.isinf(xs)))

    # Comparisons: f32 (with ties, NaN, ±0), i32, i64, broadcasting both ways.
    a = np.concatenate([SPECIAL, randf(r, 16)])
    b = np.concatenate([np.roll(SPECIAL, 3), a[24:32], randf(r, 8)])
    b[::5] = a[::5]
    ai = r.integers(-3, 3, (4, 1, 6)).astype(np.int32)
    bi = r.integers(-3, 3, (5, 1)).astype(np.int32)
    al = r.integers(-2**40, 2**40, (3, 4)).astype(np.int64)
    for op in ("Greater", "Less", "GreaterOrEqual", "LessOrEqual"):
        out.append(Case(f"{op.lower()}_f32", op, {"a": a, "b": b}, out_type=TP.BOOL))
        out.append(Case(f"{op.lower()}_f32_broadcast", op, {"a": x}, init={"b": randf(r, 3, 1)}, out_type=TP.BOOL))
        out.append(Case(f"{op.lower()}_i32_broadcast", op, {"a": ai, "b": bi}, out_type=TP.BOOL))
        out.append(Case(f"{op.lower()}_i64", op, {"a": al}, init={"b": al[1:2].copy()}, out_type=TP.BOOL))
        out.append(Case(f"{op.lower()}_opset11", op, {"a": x, "b": randf(r, 4)}, opset=11 if "Or" not in op else 12,
                        out_type=TP.BOOL))
    p = r.integers(0, 2, (3, 4)).astype(bool)
    q = r.integers(0, 2, (4,)).astype(bool)
    for op in ("And", "Or", "Xor"):
        out.append(Case(op.lower(), op, {"p": p, "q": q}))
    out.append(Case("not", "Not", {"p": p}))
    # Not of a comparison feeding Where: the run-time chain the old equal(x, false) lowering served.
    out.append(Case("not_of_less_where", None, {"x": x}, init={"t": np.float32(0.5), "m": np.float32(-1.0)},
                    nodes=[helper.make_node("Less", ["x", "t"], ["c"]), helper.make_node("Not", ["c"], ["n"]),
                           helper.make_node("Where", ["n", "x", "m"], ["y"])]))

    # Variadic Max / Min / Sum / Mean: 1..4 inputs, broadcasting across all of them, NaN in Max / Min.
    v = [randf(r, 2, 3, 4), randf(r, 3, 1), randf(r, 4), randf(r, 1, 1, 1)]
    v[0].reshape(-1)[:6] = np.float32([NAN, 0.0, -0.0, INF, -INF, 1.0])
    v[2][:2] = np.float32([-0.0, NAN])
    for op in ("Max", "Min", "Sum", "Mean"):
        for n in (1, 2, 3, 4):
            ins = {f"v{i}": v[i] for i in range(n)}
            out.append(Case(f"{op.lower()}_{n}", op, ins))
        out.append(Case(f"{op.lower()}_opset13_const", op, {"v0": v[0]}, init={"c": randf(r, 4)}, opset=13))
    for op in ("Max", "Min"):
        out.append(Case(f"{op.lower()}_i32", op, {"a": ai, "b": bi}))
        out.append(Case(f"{op.lower()}_i64_3", op, {"a": al, "b": al[::-1].copy()}, init={"c": np.int64([5, -5, 0, 7])}))
        out.append(Case(f"{op.lower()}_special_pairs", op,
                        {"a": np.repeat(SPECIAL, len(SPECIAL)), "b": np.tile(SPECIAL, len(SPECIAL))}))

    # Ops composed at import for the real models (onnx_ops_misc.cc, op_clip): IsNaN, LogSoftmax (every
    # axis from opset 13, the last before), Clip with run-time bounds, GatherND with known indices.
    out.append(Case("isnan", "IsNaN", {"x": xs}, out_type=TP.BOOL))
    for axis in (-1, 0, 1):
        out.append(Case(f"log_softmax_axis{axis}", "LogSoftmax", {"x": x * 10}, {"axis": axis}))
    out.append(Case("log_softmax_opset11", "LogSoftmax", {"x": x}, {"axis": 2}, opset=11))
    wide = x * 40
    wide[0, 0, :] = np.float32([-INF, 0.0, 100.0, -100.0])
    out.append(Case("log_softmax_extremes", "LogSoftmax", {"x": wide}))
    # (No NaN in x here: reduce_max's NaN rule differs from onnxruntime's, kernels/reference/README.md.)
    out.append(Case("clip_runtime_min", None, {"x": x * 40}, nodes=[
        helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0), helper.make_node("Sub", ["m", "d"], ["lo"]),
        helper.make_node("Clip", ["x", "lo"], ["y"])], init={"d": np.float32(80.0)}))
    out.append(Case("clip_runtime_both", None, {"x": x, "lo": np.array(-1.0, np.float32), "hi": np.array(0.5, np.float32)},
                    nodes=[helper.make_node("Clip", ["x", "lo", "hi"], ["y"])]))
    out.append(Case("clip_runtime_max_const_min", None, {"x": x, "hi": np.array(0.25, np.float32)}, init={"lo": np.float32(-0.5)},
                    nodes=[helper.make_node("Clip", ["x", "lo", "hi"], ["y"])]))
    out.append(Case("gather_nd_rows", "GatherND", {"x": x}, init={"i": np.int64([[1, 2], [0, -1], [1, 0]])}))
    out.append(Case("gather_nd_elements", "GatherND", {"x": x}, init={"i": np.int64([[[0, 1, 3]], [[1, 2, 0]]])}))

    # Refusals: the export fails naming the node and the reason.
    err = []
    err.append(Case("err_gather_nd_oob", "GatherND", {"x": x}, init={"i": np.int64([[2, 0]])},
                    expect_error="index 2 at position 0 is outside [-2, 2) (data dim 0)"))
    err.append(Case("err_gather_nd_runtime", "GatherND", {"x": x, "i": np.int64([[1, 0]])},
                    expect_error="must be known at export"))
    err.append(Case("err_log_int", "Log", {"x": i32}, expect_error="has dtype i32, which Ember's Log does not support"))
    err.append(Case("err_leaky_attr", "LeakyRelu", {"x": x}, {"beta": 1.0},
                    expect_error="attribute 'beta' is not supported"))
    err.append(Case("err_prelu_slope", "PRelu", {"x": xp}, init={"slope": randf(r, 3)},
                    expect_error="does not broadcast to x"))
    err.append(Case("err_greater_i8", "Greater", {"a": np.int8([1, 2]), "b": np.int8([2, 1])}, out_type=TP.BOOL,
                    expect_error="has dtype i8"))
    err.append(Case("err_sum_i32", "Sum", {"a": ai, "b": bi}, expect_error="has dtype i32, which Ember's Sum"))
    err.append(Case("err_and_float", "And", {"a": x, "b": x}, out_type=TP.BOOL, expect_error="has dtype f32"))
    err.append(Case("err_selu_inf", "Selu", {"x": x}, {"gamma": float("inf")}, expect_error="'gamma' must be finite"))
    return out + err


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def compare(name, ember, ref, skip):
    if ember.shape != ref.shape:
        return f"shape {list(ember.shape)} vs onnxruntime {list(ref.shape)}"
    if ember.dtype != ref.dtype:
        return f"dtype {ember.dtype} vs onnxruntime {ref.dtype}"
    e, o = ember.reshape(-1), ref.reshape(-1)
    keep = np.ones(e.shape, bool) if skip is None else ~np.asarray(skip).reshape(-1)
    if e.dtype.kind != "f":
        bad = np.flatnonzero((e != o) & keep)
    else:
        ed, od = e.astype(np.float64), o.astype(np.float64)
        with np.errstate(invalid="ignore"):
            ok = np.isnan(ed) & np.isnan(od)
            ok |= np.isinf(od) & (ed == od)
            fin = np.isfinite(od) & np.isfinite(ed)
            ok |= fin & (np.abs(ed - od) <= 1e-6 + 2e-6 * np.abs(od))
        bad = np.flatnonzero(~ok & keep)
    if bad.size:
        i = bad[0]
        return f"{bad.size} element(s) differ, first {i}: ember {e[i]!r}, onnxruntime {o[i]!r}"
    return None


def check(case, args):
    d = os.path.join(args.work, case.name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model = case.model()
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    pte = os.path.join(d, "model.pte")
    p = run([args.exporter, path, "-o", pte])
    msg = (p.stderr + p.stdout).strip()
    if case.expect_error:
        if p.returncode != 1:
            return f"expected the export to fail (exit 1), got exit {p.returncode}"
        node = f"{case.name}_node"
        for want in (case.expect_error, node):
            if want not in p.stderr:
                return f"the error does not say {want!r}: {msg.splitlines()[-1] if msg else '(nothing)'}"
        return None
    if p.returncode != 0:
        return f"export failed: {msg.splitlines()[-1] if msg else p.returncode}"
    feeds = dict(case.inputs)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    cmd = [args.runner, "--program", pte, "--output-dir", d, "--threads", "2"]
    for k, v in feeds.items():
        f = os.path.join(d, f"in_{k}.npy")
        np.save(f, v)
        cmd += ["--input", f"{k}={f}"]
    p = run(cmd)
    if p.returncode != 0:
        return f"runner failed: {(p.stderr + p.stdout).strip().splitlines()[-1]}"
    return compare(case.name, np.load(os.path.join(d, "y.npy")), ref, case.skip)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    args = ap.parse_args()
    failures = []
    selected = [c for c in cases() if args.k in c.name]
    for c in selected:
        why = check(c, args)
        print(f"{c.name}: {'ok' if why is None else 'FAIL: ' + why}")
        if why is not None:
            failures.append(c.name)
    if failures:
        print(f"FAIL: {len(failures)} of {len(selected)} cases: {', '.join(failures)}")
        return 1
    shutil.rmtree(args.work, ignore_errors=True)
    print(f"PASS: {len(selected)} cases match onnxruntime or fail as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
