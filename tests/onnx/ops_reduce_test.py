#!/usr/bin/env python3
"""Issue 17's reductions and index ops, imported from ONNX and compared with onnxruntime.

  .venv/bin/python tests/onnx/ops_reduce_test.py --exporter EXPORTER --runner RUNNER --work DIR [-k NAME]

Each case is a small model made with onnx.helper (every attribute mode and opset difference of
ReduceMax / ReduceMin / ReduceProd / ReduceLogSumExp / ReduceSumSquare / ReduceL1 / ReduceLogSum,
ArgMax / ArgMin, TopK, CumSum, GatherElements, GroupNormalization / InstanceNormalization, Tile,
DepthToSpace / SpaceToDepth, Squeeze / Unsqueeze with axes computed at export), exported with
`exporter`, run with `runner` and compared with onnxruntime on the same seeded inputs (f32 within
rtol 1e-5 / atol 1e-6 elementwise, integers exactly). Error cases check the exporter's or the
runner's exit status and message: what is refused at export (a run-time TopK K, a run-time CumSum
axis, ...) and the run-time index checks of Gather and GatherElements. Cases whose program needs a
kernel this build lacks (log / abs come with the elementwise ops of issue 17) are reported as SKIP.
Exit status 0 = every case passed or was skipped; the last line says what failed.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
NP = {F: np.float32, I64: np.int64, I32: np.int32}


class Case:
    def __init__(self, name, nodes, inputs, outputs, opset=17, inits=(), input_shape=(), error=None,
                 run_error=None, sort_topk=False, rtol=1e-5, atol=1e-6, onnx_reference=False):
        self.name, self.nodes, self.inputs, self.outputs = name, nodes, inputs, outputs
        self.opset, self.inits, self.input_shape = opset, list(inits), list(input_shape)
        self.error, self.run_error, self.sort_topk = error, run_error, sort_topk
        self.rtol, self.atol = rtol, atol
        # onnxruntime 1.22 refuses some valid models (noop_with_empty_axes without axes): onnx's
        # reference evaluator is the oracle there.
        self.onnx_reference = onnx_reference

    def model(self):
        ins = [helper.make_tensor_value_info(n, t, s) for n, t, s, _ in self.inputs]
        outs = [helper.make_tensor_value_info(n, t, None) for n, t in self.outputs]
        inits = [numpy_helper.from_array(a, n) for n, a in self.inits]
        graph = helper.make_graph(self.nodes, self.name, ins, outs, inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="ember-tests")
        m.ir_version = 8
        return m


def rand(seed, shape, kind="normal"):
    r = np.random.default_rng(seed)
    if kind == "normal":
        return r.standard_normal(shape).astype(np.float32)
    if kind == "positive":
        return r.uniform(0.5, 2.0, shape).astype(np.float32)
    if kind == "ties":
        return r.integers(0, 4, shape).astype(np.float32)
    raise ValueError(kind)


def x_in(shape, seed=1, kind="normal", name="x", dtype=F, data=None):
    if data is None:
        data = rand(seed, shape, kind) if dtype == F else np.random.default_rng(seed).integers(
            -50, 50, shape).astype(NP[dtype])
    return (name, dtype, list(shape), data)


def node(op, ins, outs=("y",), name=None, **attrs):
    return helper.make_node(op, list(ins), list(outs), name=name or f"{op.lower()}_node", **attrs)


def const(name, values, dtype=np.int64):
    return (name, np.array(values, dtype=dtype))


def cases():
    out = []
    add = out.append
    # ---- ReduceMax / ReduceMin / ReduceProd: axes attribute before opset 18, input from 18.
    for op in ("ReduceMax", "ReduceMin", "ReduceProd"):
        low = op.lower()
        kind = "positive" if op == "ReduceProd" else "normal"
        add(Case(f"{low}_opset13_keep", [node(op, ["x"], axes=[1])], [x_in((2, 5, 3), kind=kind)], [("y", F)], 13))
        add(Case(f"{low}_opset13_two_axes", [node(op, ["x"], axes=[0, -1], keepdims=0)],
                 [x_in((2, 5, 3), 2, kind)], [("y", F)], 13))
        add(Case(f"{low}_opset13_all", [node(op, ["x"], keepdims=0)], [x_in((3, 4), 3, kind)], [("y", F)], 13))
        add(Case(f"{low}_opset18_input_axes", [node(op, ["x", "axes"], keepdims=0)], [x_in((2, 5, 7), 4, kind)],
                 [("y", F)], 18, inits=[const("axes", [-1])]))
        add(Case(f"{low}_opset18_no_axes", [node(op, ["x"])], [x_in((2, 3), 5, kind)], [("y", F)], 18))
        add(Case(f"{low}_opset18_noop_empty", [node(op, ["x"], noop_with_empty_axes=1)], [x_in((2, 3), 6, kind)],
                 [("y", F)], 18, onnx_reference=True))
    for op in ("ReduceMax", "ReduceMin"):
        for dt in (I32, I64):
            add(Case(f"{op.lower()}_{np.dtype(NP[dt]).name}", [node(op, ["x", "axes"], keepdims=1)],
                     [x_in((3, 4, 5), 7, dtype=dt)], [("y", dt)], 18, inits=[const("axes", [0, 2])]))
    # Softmax-like use: x - ReduceMax(x) on a batch with a symbolic size.
    add(Case("reducemax_softmax_like_symbolic", [node("ReduceMax", ["x"], ["m"], axes=[-1]), node("Sub", ["x", "m"])],
             [("x", F, ["batch", 9], rand(8, (3, 9)))], [("y", F)], 13, input_shape=["x=batch:1..4x9"]))

    # ---- Composed reductions.
    for op, kind in (("ReduceLogSumExp", "normal"), ("ReduceSumSquare", "normal"), ("ReduceL1", "normal"),
                     ("ReduceLogSum", "positive")):
        low = op.lower()
        add(Case(f"{low}_opset13", [node(op, ["x"], axes=[1], keepdims=0)], [x_in((2, 6, 3), 9, kind)], [("y", F)], 13))
        add(Case(f"{low}_opset18_keep", [node(op, ["x", "axes"])], [x_in((2, 6, 3), 10, kind)], [("y", F)], 18,
                 inits=[const("axes", [0, 2])]))
        add(Case(f"{low}_opset18_noop_empty", [node(op, ["x"], noop_with_empty_axes=1)], [x_in((2, 3), 11, kind)],
                 [("y", F)], 18, onnx_reference=True))
    # exp(x) alone would overflow f32 here: the max is subtracted first.
    add(Case("reducelogsumexp_large", [node("ReduceLogSumExp", ["x"], axes=[-1], keepdims=0)],
             [x_in((3, 8), data=(rand(12, (3, 8)) * 60 + 100).astype(np.float32))], [("y", F)], 13))

    # ---- ArgMax / ArgMin.
    for op in ("ArgMax", "ArgMin"):
        low = op.lower()
        add(Case(f"{low}_axis1_keep", [node(op, ["x"], axis=1)], [x_in((2, 7, 3), 13)], [("y", I64)], 13))
        add(Case(f"{low}_last_nokeep", [node(op, ["x"], axis=-1, keepdims=0)], [x_in((4, 9), 14)], [("y", I64)], 13))
        add(Case(f"{low}_ties_first", [node(op, ["x"], axis=1, keepdims=0)], [x_in((5, 8), 15, "ties")],
                 [("y", I64)], 13))
        add(Case(f"{low}_ties_last", [node(op, ["x"], axis=1, keepdims=0, select_last_index=1)],
                 [x_in((5, 8), 16, "ties")], [("y", I64)], 13))
        nan = rand(17, (6, 5))
        nan[0, 0] = nan[1, 2] = nan[2, 4] = nan[3, 0] = nan[3, 3] = np.nan
        add(Case(f"{low}_nan", [node(op, ["x"], axis=1, keepdims=0)], [x_in((6, 5), data=nan)], [("y", I64)], 13))
        add(Case(f"{low}_nan_last", [node(op, ["x"], axis=1, keepdims=0, select_last_index=1)],
                 [x_in((6, 5), data=nan)], [("y", I64)], 13))
        add(Case(f"{low}_int64", [node(op, ["x"], axis=0)], [x_in((6, 3), 18, dtype=I64)], [("y", I64)], 13))
    add(Case("argmax_opset11", [node("ArgMax", ["x"], axis=-1, keepdims=0)], [x_in((3, 10), 19)], [("y", I64)], 11))

    # ---- TopK.
    add(Case("topk_last_largest", [node("TopK", ["x", "k"], ["v", "i"])], [x_in((3, 10), 20)],
             [("v", F), ("i", I64)], 13, inits=[const("k", [4])]))
    add(Case("topk_axis0_smallest", [node("TopK", ["x", "k"], ["v", "i"], axis=0, largest=0)], [x_in((7, 2, 3), 21)],
             [("v", F), ("i", I64)], 13, inits=[const("k", [3])]))
    add(Case("topk_ties", [node("TopK", ["x", "k"], ["v", "i"], axis=1)], [x_in((4, 12), 22, "ties")],
             [("v", F), ("i", I64)], 13, inits=[const("k", [6])]))
    add(Case("topk_ties_smallest", [node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0)],
             [x_in((4, 12), 23, "ties")], [("v", F), ("i", I64)], 13, inits=[const("k", [5])]))
    add(Case("topk_unsorted", [node("TopK", ["x", "k"], ["v", "i"], sorted=0)], [x_in((3, 9), 24)],
             [("v", F), ("i", I64)], 13, inits=[const("k", [4])], sort_topk=True))
    # K from Shape arithmetic: half the last dim.
    add(Case("topk_k_from_shape", [node("Shape", ["x"], ["s"]), node("Gather", ["s", "one"], ["d"], axis=0),
                                   node("Div", ["d", "two"], ["k"]), node("TopK", ["x", "k"], ["v", "i"])],
             [x_in((2, 10), 25)], [("v", F), ("i", I64)], 13, inits=[const("one", [1]), const("two", [2])]))
    add(Case("topk_values_only", [node("TopK", ["x", "k"], ["v", "unused"])], [x_in((2, 6), 26)], [("v", F)], 13,
             inits=[const("k", [2])]))

    # ---- CumSum.
    for ex in (0, 1):
        for rev in (0, 1):
            add(Case(f"cumsum_ex{ex}_rev{rev}", [node("CumSum", ["x", "axis"], exclusive=ex, reverse=rev)],
                     [x_in((3, 8, 2), 27)], [("y", F)], 13, inits=[const("axis", 1)]))
    add(Case("cumsum_negative_axis_i32", [node("CumSum", ["x", "axis"])], [x_in((4, 5), 28, dtype=I32)],
             [("y", I32)], 13, inits=[const("axis", [-1], np.int32)]))
    add(Case("cumsum_i64_axis0_rev", [node("CumSum", ["x", "axis"], reverse=1)], [x_in((6, 3), 29, dtype=I64)],
             [("y", I64)], 14, inits=[const("axis", 0)]))

    # ---- GatherElements.
    idx = np.array([[0, -1, 4], [2, 2, -5], [1, 3, 0]], np.int64)
    add(Case("gather_elements_axis1_input_indices", [node("GatherElements", ["x", "idx"], axis=1)],
             [x_in((3, 5), 30), x_in((3, 3), name="idx", dtype=I64, data=idx)], [("y", F)], 13))
    add(Case("gather_elements_axis0_const_i32", [node("GatherElements", ["x", "idx"], axis=0)], [x_in((4, 3), 31)],
             [("y", F)], 13, inits=[("idx", np.array([[3, 0, 1], [-1, 2, 2]], np.int32))]))
    add(Case("gather_elements_rank3_int64_data", [node("GatherElements", ["x", "idx"], axis=-1)],
             [x_in((2, 3, 4), 32, dtype=I64),
              x_in((2, 2, 5), name="idx", dtype=I64, data=np.random.default_rng(33).integers(-4, 4, (2, 2, 5)))],
             [("y", I64)], 13))

    # ---- GroupNormalization / InstanceNormalization.
    scale6, bias6 = rand(34, (6,)), rand(35, (6,))
    add(Case("instance_norm_opset13", [node("InstanceNormalization", ["x", "s", "b"], epsilon=1e-3)],
             [x_in((2, 6, 4, 5), 36)], [("y", F)], 13, inits=[("s", scale6), ("b", bias6)], atol=1e-5))
    add(Case("instance_norm_rank3", [node("InstanceNormalization", ["x", "s", "b"])], [x_in((3, 6, 11), 37)],
             [("y", F)], 17, inits=[("s", scale6), ("b", bias6)], atol=1e-5))
    add(Case("group_norm_opset18_per_group", [node("GroupNormalization", ["x", "s", "b"], num_groups=3, epsilon=1e-5)],
             [x_in((2, 6, 3, 4), 38)], [("y", F)], 18, inits=[("s", rand(39, (3,))), ("b", rand(40, (3,)))], atol=1e-5))
    add(Case("group_norm_opset21_per_channel", [node("GroupNormalization", ["x", "s", "b"], num_groups=2)],
             [x_in((2, 6, 5), 41)], [("y", F)], 21, inits=[("s", scale6), ("b", bias6)], atol=1e-5))

    # ---- Tile, DepthToSpace, SpaceToDepth (movement at import).
    add(Case("tile_2_1_3", [node("Tile", ["x", "r"])], [x_in((2, 3, 2), 42)], [("y", F)], 13,
             inits=[const("r", [2, 1, 3])]))
    add(Case("tile_rank4_symbolic_batch", [node("Tile", ["x", "r"])], [("x", F, ["batch", 2, 3, 2], rand(43, (2, 2, 3, 2)))],
             [("y", F)], 13, inits=[const("r", [1, 2, 1, 3])], input_shape=["x=batch:1..4x2x3x2"]))
    add(Case("tile_ones", [node("Tile", ["x", "r"]), ], [x_in((2, 3), 44)], [("y", F)], 13,
             inits=[const("r", [1, 1])]))
    for mode in ("DCR", "CRD"):
        add(Case(f"depth_to_space_{mode.lower()}", [node("DepthToSpace", ["x"], blocksize=2, mode=mode)],
                 [x_in((2, 8, 3, 4), 45)], [("y", F)], 13))
    add(Case("space_to_depth", [node("SpaceToDepth", ["x"], blocksize=2)], [x_in((2, 3, 4, 6), 46)], [("y", F)], 13))

    # ---- Squeeze / Unsqueeze with axes computed at export (Shape arithmetic).
    add(Case("unsqueeze_axes_from_shape", [node("Shape", ["x"], ["s"]), node("Shape", ["s"], ["r"], name="rank"),
                                          node("Unsqueeze", ["x", "r"], ["u"]), node("Relu", ["u"])],
             [x_in((2, 3), 47)], [("y", F)], 13))
    add(Case("squeeze_axes_from_concat", [node("Concat", ["a0", "a2"], ["ax"], axis=0), node("Squeeze", ["x", "ax"], ["q"]),
                                         node("Relu", ["q"])],
             [x_in((1, 4, 1, 3), 48)], [("y", F)], 13, inits=[const("a0", [0]), const("a2", [-2])]))

    # ---- Refused at export.
    add(Case("error_topk_runtime_k", [node("TopK", ["x", "k"], ["v", "i"])],
             [x_in((2, 6), 49), x_in((1,), name="k", dtype=I64, data=np.array([2], np.int64))], [("v", F), ("i", I64)], 13,
             error=["TopK", "topk_node", "K (input 'k') is computed at run time"]))
    add(Case("error_topk_k_too_large", [node("TopK", ["x", "k"], ["v", "i"])], [x_in((2, 6), 50)],
             [("v", F), ("i", I64)], 13, inits=[const("k", [7])], error=["TopK", "K = 7 exceeds axis 1's size 6"]))
    add(Case("error_cumsum_runtime_axis", [node("CumSum", ["x", "axis"])],
             [x_in((2, 6), 51), x_in((), name="axis", dtype=I64, data=np.array(1, np.int64))], [("y", F)], 13,
             error=["CumSum", "axis (input 'axis') must be an integer constant known at export"]))
    add(Case("error_group_norm_groups", [node("GroupNormalization", ["x", "s", "b"], num_groups=4)],
             [x_in((2, 6, 5), 52)], [("y", F)], 21, inits=[("s", scale6), ("b", bias6)],
             error=["GroupNormalization", "num_groups 4 does not divide the 6 channels"]))
    add(Case("error_group_norm_stash_type", [node("GroupNormalization", ["x", "s", "b"], num_groups=2, stash_type=0)],
             [x_in((2, 6, 5), 53)], [("y", F)], 21, inits=[("s", scale6), ("b", bias6)], error=["stash_type"]))
    add(Case("error_depth_to_space_mode", [node("DepthToSpace", ["x"], blocksize=2, mode="XYZ")],
             [x_in((1, 4, 2, 2), 54)], [("y", F)], 13, error=["DepthToSpace", "mode' = 'XYZ' is not supported"]))
    add(Case("error_tile_runtime_repeats", [node("Tile", ["x", "r"])],
             [x_in((2, 3), 55), x_in((2,), name="r", dtype=I64, data=np.array([1, 2], np.int64))], [("y", F)], 13,
             error=["Tile", "repeats (input 'r') must be an integer constant known at export"]))
    add(Case("error_argmax_empty_axis", [node("ArgMax", ["x"], axis=1)], [x_in((2, 0), 56)], [("y", I64)], 13,
             error=["argmax: axis 1 of [2, 0] is empty"]))
    add(Case("error_reducemax_f16", [node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
                                     node("ReduceMax", ["h"], ["m"], axes=[1]), node("Cast", ["m"], ["y"], to=F)],
             [x_in((2, 3), 57)], [("y", F)], 13, error=["reduce_max: input must be f32, i32 or i64, got f16"]))
    add(Case("error_gather_constant_out_of_range", [node("Gather", ["w", "i"], ["g"], axis=0), node("Add", ["g", "x"])],
             [x_in((2, 3), 58)], [("y", F)], 13, inits=[("w", rand(59, (4, 3))), const("i", [1, 9])],
             error=["Gather", "gather: index 9 at indices[1] is outside [-4, 4) (axis 0 of data [4, 3])"]))
    add(Case("error_gather_elements_const_indices_runtime", [node("GatherElements", ["x", "i"], axis=1)],
             [x_in((2, 3), 60)], [("y", F)], 13, inits=[("i", np.array([[0, 1], [3, 0]], np.int64))],
             run_error=["gather_elements: index 3 at indices[1, 0] is outside [-3, 3) (axis 1 of data [2, 3])"]))
    # ---- Refused at run time: the index checks (runner exits non-zero naming the op and the index).
    add(Case("error_gather_runtime_out_of_range", [node("Gather", ["x", "i"], axis=1)],
             [x_in((2, 5), 61), x_in((3,), name="i", dtype=I64, data=np.array([0, -5, 7], np.int64))], [("y", F)], 13,
             run_error=["gather: index 7 at indices[2] is outside [-5, 5) (axis 1 of data [2, 5])"]))
    add(Case("error_gather_runtime_negative", [node("Gather", ["x", "i"], axis=0)],
             [x_in((3, 2), 62), x_in((2, 2), name="i", dtype=I32, data=np.array([[0, 1], [-4, 2]], np.int32))],
             [("y", F)], 13, run_error=["gather: index -4 at indices[1, 0] is outside [-3, 3) (axis 0 of data [3, 2])"]))
    add(Case("error_gather_elements_runtime", [node("GatherElements", ["x", "i"], axis=0)],
             [x_in((2, 3), 63), x_in((1, 3), name="i", dtype=I64, data=np.array([[0, 2, 1]], np.int64))], [("y", F)], 13,
             run_error=["gather_elements: index 2 at indices[0, 1] is outside [-2, 2) (axis 0 of data [2, 3])"]))
    return out


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


# Kernels that come with other parts of issue 17: a case whose program needs one is skipped when it
# is missing from this build.
MISSING_KERNEL_HINTS = ("log(", "abs(")


def check(case, args):
    d = os.path.join(args.work, case.name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model_path = os.path.join(d, "model.onnx")
    onnx.save(case.model(), model_path)
    pte = os.path.join(d, "model.pte")
    cmd = [args.exporter, model_path, "-o", pte]
    for s in case.input_shape:
        cmd += ["--input-shape", s]
    p = run(cmd)
    msg = (p.stderr + p.stdout).strip()
    if case.error:
        if p.returncode != 1:
            return "FAIL", f"expected the export to fail with exit 1, got {p.returncode}: {msg[-400:]}"
        missing = [w for w in case.error if w not in p.stderr]
        if missing:
            return "FAIL", f"the error does not say {missing}: {p.stderr.strip()[-600:]}"
        if os.path.exists(pte):
            return "FAIL", "a failed export left a .pte"
        return "PASS", p.stderr.strip().splitlines()[-1]
    if p.returncode != 0:
        if any(h in msg for h in MISSING_KERNEL_HINTS) and "kernel" in msg.lower():
            return "SKIP", "needs a kernel this build lacks: " + msg.splitlines()[-1]
        return "FAIL", f"export failed (exit {p.returncode}): {msg[-600:]}"
    out_dir = os.path.join(d, "out")
    os.makedirs(out_dir)
    cmd = [args.runner, "--program", pte, "--output-dir", out_dir]
    feeds = {}
    for name, _, _, data in case.inputs:
        path = os.path.join(d, f"{name}.npy")
        np.save(path, data)
        feeds[name] = data
        cmd += ["--input", f"{name}={path}"]
    p = run(cmd)
    msg = (p.stderr + p.stdout).strip()
    if case.run_error:
        if p.returncode == 0:
            return "FAIL", "expected the run to fail"
        missing = [w for w in case.run_error if w not in msg]
        if missing:
            return "FAIL", f"the run's error does not say {missing}: {msg[-600:]}"
        return "PASS", msg.splitlines()[-1]
    if p.returncode != 0:
        if any(h in msg for h in MISSING_KERNEL_HINTS) and "kernel" in msg.lower():
            return "SKIP", "needs a kernel this build lacks: " + msg.splitlines()[-1]
        return "FAIL", f"runner failed (exit {p.returncode}): {msg[-600:]}"
    if case.onnx_reference:
        from onnx.reference import ReferenceEvaluator
        refs = ReferenceEvaluator(model_path).run([n for n, _ in case.outputs], feeds)
    else:
        sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        refs = sess.run([n for n, _ in case.outputs], feeds)
    results = {n: np.load(os.path.join(out_dir, f"{n}.npy")) for n, _ in case.outputs}
    if case.sort_topk:  # sorted=0: ONNX leaves the order open; compare as (value, index) sets
        v, i = results["v"], results["i"]
        rv, ri = refs

        def canon(vals, idx):
            out_v, out_i = np.empty_like(vals), np.empty_like(idx)
            for row in np.ndindex(vals.shape[:-1]):
                o = sorted(range(vals.shape[-1]), key=lambda j: (-vals[row][j], idx[row][j]))
                out_v[row], out_i[row] = vals[row][o], idx[row][o]
            return out_v, out_i
        results["v"], results["i"] = canon(v, i)
        refs = list(canon(rv, ri))
    notes = []
    for (n, _), ref in zip(case.outputs, refs):
        got = results[n]
        if got.shape != ref.shape or got.dtype != ref.dtype:
            return "FAIL", f"output {n}: {got.dtype}{list(got.shape)}, onnxruntime {ref.dtype}{list(ref.shape)}"
        if np.issubdtype(ref.dtype, np.floating):
            if not np.allclose(got, ref, rtol=case.rtol, atol=case.atol, equal_nan=True):
                bad = np.argwhere(~np.isclose(got, ref, rtol=case.rtol, atol=case.atol, equal_nan=True))[0]
                return "FAIL", f"output {n} at {tuple(bad)}: {got[tuple(bad)]} vs onnxruntime {ref[tuple(bad)]}"
            err = np.max(np.abs(got.astype(np.float64) - ref)) if got.size else 0.0
            notes.append(f"{n} max |diff| {err:.2g}")
        elif not np.array_equal(got, ref):
            bad = np.argwhere(got != ref)[0]
            return "FAIL", f"output {n} at {tuple(bad)}: {got[tuple(bad)]} vs onnxruntime {ref[tuple(bad)]}"
        else:
            notes.append(f"{n} exact")
    return "PASS", ", ".join(notes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("-k", default="", help="run the cases whose name contains this")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    failed = []
    for case in cases():
        if args.k not in case.name:
            continue
        try:
            status, why = check(case, args)
        except Exception as e:  # noqa: BLE001 - report and go on
            status, why = "FAIL", f"{type(e).__name__}: {e}"
        counts[status] += 1
        print(f"{status} {case.name}: {why}")
        if status == "FAIL":
            failed.append(case.name)
    print(f"{counts['PASS']} passed, {counts['SKIP']} skipped, {counts['FAIL']} failed")
    if failed or counts["PASS"] == 0:
        print("FAIL: " + ", ".join(failed))
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
