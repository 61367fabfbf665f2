#!/usr/bin/env python3
"""ONNX LSTM / GRU through the exporter and runner, compared with onnxruntime 1.22.

  .venv/bin/python tests/onnx/rnn_import_test.py --exporter EXPORTER --runner RUNNER --work DIR

Models: torch.onnx.export of nn.LSTM / nn.GRU (1 and 2 layers, bidirectional, batch_first, with and
without initial states; Debian's torch 1.13) and onnx.helper single-node models for every attribute
mode (sequence_lens, clip, input_forget, peepholes, linear_before_reset 0 / 1, every activation with
and without alpha / beta, layout = 1, absent optional inputs, unused outputs). Each runs at 1 and 3
runner threads; outputs must be within rel L2 1e-5 and max |diff| 1e-4 + 1e-4 |ort| of onnxruntime,
and bitwise equal across the thread counts.
Then the refusals: exporter errors naming the attribute, and the runner's sequence_lens check.
Exit status 0 = pass; the last line says why on failure.
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

ACTS = ["Sigmoid", "Tanh", "Relu", "HardSigmoid", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "Affine", "Elu",
        "Softsign", "Softplus"]


class Failure(Exception):
    pass


def node_model(path, kind, T=5, B=3, I=4, H=3, direction="forward", bias=True, lens=None, h0=True, c0=True,
               peep=False, attrs=None, outputs=("Y", "Y_h", "Y_c"), layout=0, seed=0, scale=0.7, opset=14,
               weights_as_inputs=False):
    """One LSTM / GRU node; weights are initializers (or graph inputs). Returns the feeds."""
    g = 4 if kind == "LSTM" else 3
    D = 2 if direction == "bidirectional" else 1
    r = np.random.default_rng(seed)
    f = lambda *s: (r.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    x = f(B, T, I) if layout else f(T, B, I)
    w, rr = f(D, g * H, I), f(D, g * H, H)
    b = f(D, 2 * g * H) if bias else None
    state = (lambda: f(B, D, H)) if layout else (lambda: f(D, B, H))
    ih = state() if h0 else None
    ic = state() if (c0 and kind == "LSTM") else None
    p = f(D, 3 * H) if peep else None
    sl = None if lens is None else np.array(lens, np.int32)
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h"] + (["initial_c", "P"] if kind == "LSTM" else [])
    vals = [x, w, rr, b, sl, ih] + ([ic, p] if kind == "LSTM" else [])
    ins = [n if v is not None else "" for n, v in zip(names, vals)]
    while ins and ins[-1] == "":
        ins.pop()
    a = dict(direction=direction, hidden_size=H)
    if layout:
        a["layout"] = 1
    a.update(attrs or {})
    outs = [o for o in outputs if kind == "LSTM" or o != "Y_c"]
    node = helper.make_node(kind, ins, outs, name="rnn", **a)
    runtime = {"X", "sequence_lens", "initial_h", "initial_c"} | ({"W", "R", "B", "P"} if weights_as_inputs else set())
    feeds, inits, gin = {}, [], []
    for n, v in zip(names, vals):
        if v is None or n in {o for o in outs}:
            continue
        if n in runtime:
            feeds[n] = v
            gin.append(helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens" else TensorProto.FLOAT,
                                                     list(v.shape)))
        else:
            inits.append(numpy_helper.from_array(v, n))
    gout = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs if o]
    graph = helper.make_graph([node], "rnn_test", gin, gout, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="ember-tests")
    model.ir_version = 8
    onnx.save(model, path)
    return feeds


def torch_model(path, kind, layers, bidirectional, batch_first, states, seed, T=6, B=2, I=5, H=4):
    import torch
    torch.manual_seed(seed)
    cls = torch.nn.LSTM if kind == "LSTM" else torch.nn.GRU
    m = cls(I, H, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first).eval()
    D = 2 if bidirectional else 1
    x = torch.randn(B, T, I) if batch_first else torch.randn(T, B, I)
    args, names = [x], ["x"]
    if states:
        h0 = torch.randn(layers * D, B, H)
        if kind == "LSTM":
            args.append((h0, torch.randn(layers * D, B, H)))
            names += ["h0", "c0"]
        else:
            args.append(h0)
            names.append("h0")

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, *a):
            if len(a) == 3:
                return self.m(a[0], (a[1], a[2]))
            return self.m(*a)

    flat = [x] + ([args[1][0], args[1][1]] if states and kind == "LSTM" else args[1:])
    outs = ["y", "h_n"] + (["c_n"] if kind == "LSTM" else [])
    torch.onnx.export(Wrap(), tuple(flat), path, input_names=names, output_names=outs, opset_version=14)
    return {n: t.numpy() for n, t in zip(names, flat)}


def run(cmd, timeout=300):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)


def ort_reference(path, feeds):
    """onnxruntime's outputs by name. onnxruntime 1.22 refuses layout = 1 (\"Batchwise recurrent
    operations are not supported\"): such a model is run as its layout-0 twin, inputs and outputs
    transposed here (X, states [B, *, *] <-> [*, B, *]; Y [B, T, D, H] <- [T, D, B, H])."""
    model = onnx.load(path)
    node = model.graph.node[0]
    layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
    if layout == 0:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    for a in node.attribute:
        if a.name == "layout":
            a.i = 0
    for vi in model.graph.input:
        if vi.name in ("X", "initial_h", "initial_c"):
            dims = vi.type.tensor_type.shape.dim
            d0, d1 = dims[0].dim_value, dims[1].dim_value
            dims[0].dim_value, dims[1].dim_value = d1, d0
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    twin = {n: (np.ascontiguousarray(v.transpose(1, 0, 2)) if n in ("X", "initial_h", "initial_c") else v)
            for n, v in feeds.items()}
    out = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, twin)))
    return {n: np.ascontiguousarray(v.transpose(2, 0, 1, 3) if v.ndim == 4 else v.transpose(1, 0, 2))
            for n, v in out.items()}


def check_case(args, name, path, feeds):
    ref = ort_reference(path, feeds)
    out_names = list(ref)
    case_dir = os.path.join(args.work, name)
    pte = os.path.join(case_dir, "model.pte")
    p = run([args.exporter, path, "-o", pte])
    if p.returncode != 0:
        raise Failure(f"{name}: export failed: {(p.stderr + p.stdout).strip().splitlines()[-1:]}")
    for n, v in feeds.items():
        np.save(os.path.join(case_dir, n + ".npy"), v)
    for threads in (1, 3):
        out_dir = os.path.join(case_dir, f"out{threads}")
        os.makedirs(out_dir, exist_ok=True)
        cmd = [args.runner, "--program", pte, "--output-dir", out_dir, "--threads", str(threads)]
        for n in feeds:
            cmd += ["--input", f"{n}={os.path.join(case_dir, n + '.npy')}"]
        p = run(cmd)
        if p.returncode != 0:
            raise Failure(f"{name}: runner failed: {(p.stderr + p.stdout).strip().splitlines()[-1:]}")
        for o in out_names:
            got = np.load(os.path.join(out_dir, o + ".npy"))
            want = ref[o]
            if got.shape != want.shape:
                raise Failure(f"{name}: output {o} has shape {got.shape}, onnxruntime {want.shape}")
            diff = np.abs(got.astype(np.float64) - want)
            rel = np.sqrt(np.sum(diff ** 2) / max(np.sum(want.astype(np.float64) ** 2), 1e-30))
            if rel > 1e-5 or np.any(diff > 1e-4 + 1e-4 * np.abs(want)):
                raise Failure(f"{name}: output {o} (threads {threads}) rel L2 {rel:.3g}, max diff {diff.max():.3g}")
            if threads != 1:  # the cpu kernels split over hidden units, never k: the same bits
                one = np.load(os.path.join(case_dir, "out1", o + ".npy"))
                if one.tobytes() != got.tobytes():
                    raise Failure(f"{name}: output {o} differs between 1 and {threads} threads")
    print(f"ok {name}")


def expect_export_error(args, name, path, words):
    pte = os.path.join(args.work, name, "model.pte")
    p = run([args.exporter, path, "-o", pte])
    if p.returncode == 0:
        raise Failure(f"{name}: export succeeded, expected an error naming {words}")
    missing = [w for w in words if w not in p.stderr]
    if missing:
        raise Failure(f"{name}: the error does not name {missing}: {p.stderr.strip()[-400:]}")
    print(f"ok {name} (refused)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)

    cases = []  # (name, node_model kwargs)
    for kind in ("LSTM", "GRU"):
        k = kind.lower()
        for d in ("forward", "reverse", "bidirectional"):
            cases.append((f"{k}_{d}", dict(kind=kind, direction=d)))
        cases.append((f"{k}_bidirectional_lens", dict(kind=kind, direction="bidirectional", lens=[5, 0, 2])))
        cases.append((f"{k}_reverse_lens_clip", dict(kind=kind, direction="reverse", lens=[3, 5, 1],
                                                     attrs=dict(clip=0.6), scale=2.0)))
        cases.append((f"{k}_no_optional_inputs", dict(kind=kind, bias=False, h0=False, c0=False)))
        cases.append((f"{k}_only_y", dict(kind=kind, outputs=("Y",))))
        cases.append((f"{k}_only_y_h", dict(kind=kind, outputs=("", "Y_h"))))
        cases.append((f"{k}_layout1", dict(kind=kind, direction="bidirectional", layout=1, lens=[4, 5, 2])))
        cases.append((f"{k}_weights_at_run_time", dict(kind=kind, weights_as_inputs=True)))
        cases.append((f"{k}_batch1_hidden17", dict(kind=kind, B=1, H=17, I=9, T=7, direction="bidirectional")))
        per = 3 if kind == "LSTM" else 2
        for i, a in enumerate(ACTS):
            acts = ([a] + ["Tanh"] * (per - 1)) + (["Sigmoid"] + [a] * (per - 1))
            cases.append((f"{k}_act_{a}", dict(kind=kind, direction="bidirectional", scale=0.5,
                                               attrs=dict(activations=acts, clip=3.0))))
            cases.append((f"{k}_act_{a}_alpha_beta", dict(kind=kind, direction="bidirectional", scale=0.5, seed=i,
                                                          attrs=dict(activations=acts, clip=3.0,
                                                                     activation_alpha=[0.6, 0.3, 0.7][:sum(
                                                                         1 for x in acts if x in ("HardSigmoid", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "Affine", "Elu"))],
                                                                     activation_beta=[0.2, 0.4, 0.1][:sum(
                                                                         1 for x in acts if x in ("HardSigmoid", "ScaledTanh", "Affine"))]))))
    cases.append(("lstm_peepholes", dict(kind="LSTM", direction="bidirectional", peep=True)))
    cases.append(("lstm_input_forget", dict(kind="LSTM", peep=True, attrs=dict(input_forget=1))))
    cases.append(("gru_linear_before_reset", dict(kind="GRU", direction="bidirectional", attrs=dict(linear_before_reset=1))))
    cases.append(("gru_linear_before_reset_lens", dict(kind="GRU", lens=[1, 5, 0], attrs=dict(linear_before_reset=1))))
    cases.append(("lstm_opset11", dict(kind="LSTM", opset=11)))
    cases.append(("gru_opset21", dict(kind="GRU", opset=21, layout=1)))

    failures = []
    for name, kw in cases:
        os.makedirs(os.path.join(args.work, name))
        path = os.path.join(args.work, name, "model.onnx")
        # Empty entries in activation_alpha / beta: drop the attribute.
        a = kw.get("attrs", {})
        for key in ("activation_alpha", "activation_beta"):
            if key in a and not a[key]:
                del a[key]
        try:
            feeds = node_model(path, **kw)
            check_case(args, name, path, feeds)
        except Failure as e:
            failures.append(str(e))
            print("FAIL", e)

    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
        print("torch not available: torch.onnx.export cases skipped")
    if have_torch:
        for kind in ("LSTM", "GRU"):
            for layers, bi, bf, st in ((1, False, False, False), (2, False, True, True), (1, True, False, True),
                                       (2, True, True, False)):
                name = f"torch_{kind.lower()}_l{layers}{'_bi' if bi else ''}{'_batch_first' if bf else ''}{'_states' if st else ''}"
                os.makedirs(os.path.join(args.work, name))
                path = os.path.join(args.work, name, "model.onnx")
                try:
                    feeds = torch_model(path, kind, layers, bi, bf, st, seed=len(name))
                    check_case(args, name, path, feeds)
                except Failure as e:
                    failures.append(str(e))
                    print("FAIL", e)

    # Refusals.
    bad = [
        ("err_direction", dict(kind="LSTM", attrs=dict(direction="sideways")), ["'direction'", "sideways"]),
        ("err_activation", dict(kind="GRU", attrs=dict(activations=["Sigmoid", "Swish"])), ["Swish", "not supported"]),
        ("err_activation_count", dict(kind="LSTM", attrs=dict(activations=["Sigmoid", "Tanh"])),
         ["'activations'", "expected 3"]),
        ("err_alpha_count", dict(kind="GRU", attrs=dict(activations=["Sigmoid", "Tanh"], activation_alpha=[0.5])),
         ["'activation_alpha'"]),
        ("err_hidden_size", dict(kind="LSTM", attrs=dict(hidden_size=5)), ["W dim 1 is 12", "hidden_size"]),
        ("err_clip", dict(kind="GRU", attrs=dict(clip=-1.0)), ["'clip'"]),
        ("err_unknown_attr", dict(kind="GRU", attrs=dict(foo=1)), ["'foo'", "not supported"]),
        ("err_layout", dict(kind="LSTM", attrs=dict(layout=2)), ["'layout'"]),
    ]
    for name, kw, words in bad:
        os.makedirs(os.path.join(args.work, name))
        path = os.path.join(args.work, name, "model.onnx")
        try:
            node_model(path, **kw)
            expect_export_error(args, name, path, words)
        except Failure as e:
            failures.append(str(e))
            print("FAIL", e)

    # sequence_lens outside [0, T] at run time: the runner fails naming the row and the value.
    name = "err_sequence_lens_value"
    os.makedirs(os.path.join(args.work, name))
    path = os.path.join(args.work, name, "model.onnx")
    feeds = node_model(path, kind="LSTM", lens=[5, 6, 2])
    pte = os.path.join(args.work, name, "model.pte")
    p = run([args.exporter, path, "-o", pte])
    os.makedirs(os.path.join(args.work, name, "out"))
    cmd = [args.runner, "--program", pte, "--output-dir", os.path.join(args.work, name, "out")]
    for n, v in feeds.items():
        np.save(os.path.join(args.work, name, n + ".npy"), v)
        cmd += ["--input", f"{n}={os.path.join(args.work, name, n + '.npy')}"]
    p2 = run(cmd) if p.returncode == 0 else p
    msg = p2.stderr + p2.stdout
    if p.returncode != 0 or p2.returncode == 0 or "sequence_lens[1] = 6" not in msg:
        failures.append(f"{name}: expected the runner to refuse sequence_lens[1] = 6 (export {p.returncode}, "
                        f"run {p2.returncode}): {msg.strip()[-300:]}")
    else:
        print(f"ok {name} (refused at run time)")

    if failures:
        print(f"FAIL: {len(failures)} case(s): {failures[0]}")
        return 1
    print(f"PASS: {len(cases)} onnx.helper cases, torch cases, {len(bad) + 1} refusals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
