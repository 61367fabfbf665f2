#!/usr/bin/env python3
"""One ONNX end-to-end case: (cached) make the model and references, export it with Ember's
exporter, run it with runner, and compare Ember's outputs with PyTorch's and onnxruntime's.

  .venv/bin/python tests/onnx/run_model_test.py --exporter EXPORTER --runner RUNNER \
      --cache BUILD/onnx-cache CASE

Passes when every output of every run is within relative L2 error --tolerance (1e-4, f32) of both
references. For the unsupported-op cases it passes when the export fails with exit status 1 and a
message that names the op type and the node. Prints the three-way errors and the times; on failure
the last line says why (with the exporter's or runner's own message).
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cases  # noqa: E402
import make_models  # noqa: E402


class Failure(Exception):
    pass


CPU = {}   # tool name -> CPU seconds (user + system) of its runs


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_tool(cmd, timeout):
    t, c = time.time(), children_cpu()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"timed out after {timeout} s: {' '.join(cmd)}")
    name = os.path.basename(cmd[0])
    CPU[name] = CPU.get(name, 0.0) + children_cpu() - c
    return p, time.time() - t


def tail(text, lines=30):
    text = (text or "").rstrip()
    parts = text.splitlines()
    if len(parts) > lines:
        parts = [f"... ({len(parts) - lines} lines left out)"] + parts[-lines:]
    return "\n".join("    " + s for s in parts)


def check_unsupported(args, case_dir, meta, work):
    expect = meta["expect_error"]
    pte = os.path.join(work, "model.pte")
    cmd = [args.exporter, os.path.join(case_dir, "model.onnx"), "-o", pte]
    p, dt = run_tool(cmd, args.timeout)
    msg = (p.stderr + p.stdout).strip()
    print(f"export: exit {p.returncode} in {dt:.2f} s")
    print(tail(msg))
    if p.returncode != 1:
        raise Failure(f"expected the export to fail with exit status 1, got {p.returncode}")
    missing = [w for w in (expect["op_type"], expect["node"]) if w not in p.stderr]
    if missing:
        raise Failure(f"the exporter's error does not name {' and '.join(map(repr, missing))}")
    if os.path.exists(pte):
        raise Failure(f"a failed export left {pte} behind")
    return f"PASS: export refused op {expect['op_type']} (node {expect['node']}) with exit status 1"


def check_gap(args, case_dir, meta, op_type, work):
    """A known gap (cases.KNOWN_GAPS): the export must fail with exit 1 naming the op, writing nothing."""
    pte = os.path.join(work, "model.pte")
    cmd = [args.exporter, os.path.join(case_dir, "model.onnx"), "-o", pte]
    for s in meta.get("input_shape", []):
        cmd += ["--input-shape", s]
    p, dt = run_tool(cmd, args.timeout)
    print(f"export: exit {p.returncode} in {dt:.2f} s")
    print(tail((p.stderr + p.stdout).strip()))
    if p.returncode == 0:
        raise Failure(f"known gap {op_type} now exports: make this a normal case in cases.py")
    if p.returncode != 1 or op_type not in p.stderr:
        raise Failure(f"expected exit status 1 naming {op_type!r}, got {p.returncode}")
    if os.path.exists(pte):
        raise Failure(f"a failed export left {pte} behind")
    return f"PASS (known gap): export refused {op_type} with exit status 1"


def check_model(args, case_dir, meta, work):
    pte = os.path.join(work, "model.pte")
    cmd = [args.exporter, os.path.join(case_dir, "model.onnx"), "-o", pte]
    for s in meta.get("input_shape", []):
        cmd += ["--input-shape", s]
    if args.backends:
        cmd += ["--backends", args.backends]
    p, dt_export = run_tool(cmd, args.timeout)
    print(f"export: {' '.join(cmd[1:])}: exit {p.returncode} in {dt_export:.2f} s")
    if p.returncode != 0:
        print(tail(p.stderr + p.stdout))
        first = (p.stderr.strip() or p.stdout.strip() or "(no message)").splitlines()[-1]
        raise Failure(f"export failed (exit {p.returncode}): {first}")

    failures = []
    dt_runs = []
    for run in meta["runs"]:
        out_dir = os.path.join(work, f"out_{run['label']}")
        os.makedirs(out_dir, exist_ok=True)
        cmd = [args.runner, "--program", pte, "--output-dir", out_dir, "--threads", str(args.threads)]
        for name, f in run["inputs"].items():
            cmd += ["--input", f"{name}={os.path.join(case_dir, f)}"]
        p, dt = run_tool(cmd, args.timeout)
        dt_runs.append(dt)
        shapes = ", ".join(f"{k} {v}" for k, v in run.get("shapes", {}).items())
        print(f"run {run['label']} ({shapes}): exit {p.returncode} in {dt:.2f} s")
        if p.returncode != 0:
            print(tail(p.stderr + p.stdout))
            first = (p.stderr.strip() or p.stdout.strip() or "(no message)").splitlines()[-1]
            failures.append(f"run {run['label']}: runner failed (exit {p.returncode}): {first}")
            continue
        for o in meta["outputs"]:
            path = os.path.join(out_dir, f"{o}.npy")
            if not os.path.exists(path):
                failures.append(f"run {run['label']}: runner wrote no {o}.npy "
                                f"(found: {sorted(os.listdir(out_dir))})")
                continue
            ember = np.load(path)
            ref_t = np.load(os.path.join(case_dir, run["torch"][o]))
            ref_o = np.load(os.path.join(case_dir, run["ort"][o]))
            if ember.shape != ref_t.shape:
                failures.append(f"run {run['label']}: output {o} has shape {list(ember.shape)}, "
                                f"PyTorch's is {list(ref_t.shape)}")
                continue
            e_t = make_models.rel_l2(ember, ref_t)
            e_o = make_models.rel_l2(ember, ref_o)
            t_o = make_models.rel_l2(ref_o, ref_t)
            ok = e_t <= args.tolerance and e_o <= args.tolerance
            print(f"  {o} {list(ember.shape)}: rel L2 ember-vs-torch {e_t:.3g}, ember-vs-ort {e_o:.3g}, "
                  f"torch-vs-ort {t_o:.3g}  {'ok' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"run {run['label']}: output {o}: relative L2 error "
                                f"{max(e_t, e_o):.3g} > {args.tolerance} "
                                f"(vs PyTorch {e_t:.3g}, vs onnxruntime {e_o:.3g})")
    print(f"times: export {dt_export:.2f} s, runner {sum(dt_runs):.2f} s over {len(dt_runs)} run(s)")
    if failures:
        raise Failure("; ".join(failures))
    return f"PASS: {len(meta['runs'])} run(s) within relative L2 {args.tolerance} of PyTorch and onnxruntime"


def torch2_case(args):
    """A checked-in PyTorch 2 export (cases.TORCH2_DIR): its PyTorch output is in the folder;
    onnxruntime's is computed here, into the build tree."""
    spec = cases.cases()[args.case]
    case_dir = os.path.join(cases.TORCH2_DIR, spec["model"])
    with open(os.path.join(case_dir, "meta.json")) as f:
        made = json.load(f)
    out_dir = os.path.join(args.cache, args.case)
    os.makedirs(out_dir, exist_ok=True)
    x = np.load(os.path.join(case_dir, "input.npy"))
    ort_out = make_models.ort_run(os.path.join(case_dir, "model.onnx"), {made["input_name"]: x})
    ort_path = os.path.join(out_dir, "ort_output.npy")
    np.save(ort_path, ort_out[made["output_name"]])
    print(f"{args.case}: written by torch {made['torch']} ({made['exporter']} exporter), opset {made['opset']}")
    meta = {"kind": "torch2", "outputs": [made["output_name"]],
            "runs": [{"label": "static", "inputs": {made["input_name"]: "input.npy"},
                      "torch": {made["output_name"]: "torch_output.npy"},
                      "ort": {made["output_name"]: ort_path}}]}
    return case_dir, meta


def dir_mb(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--cache", required=True, help="cache of made models (the build tree's onnx-cache)")
    ap.add_argument("--seed", type=int, default=make_models.DEFAULT_SEED)
    ap.add_argument("--tolerance", type=float, default=1e-4, help="relative L2 error bound (f32)")
    ap.add_argument("--threads", type=int, default=1, help="runner --threads")
    ap.add_argument("--timeout", type=int, default=600, help="seconds for each exporter/runner call")
    ap.add_argument("--keep", action="store_true", help="keep the .pte and Ember's outputs after a pass")
    ap.add_argument("--cache-limit-mb", type=float, default=64,
                    help="after a pass, delete the made case from the cache when it is larger than this "
                         "(every case cached: 16.5 GB; cases up to 64 MB: 1.8 GB); negative keeps all")
    ap.add_argument("--backends", default="",
                    help="exporter --backends (e.g. xnnpack,portable); default: the exporter's (portable)")
    ap.add_argument("case")
    args = ap.parse_args()

    t0, c0 = time.time(), time.process_time()
    try:
        if cases.cases().get(args.case, {}).get("kind") == "torch2":
            case_dir, meta = torch2_case(args)
            work = os.path.join(args.cache, args.case, "ember")
        else:
            case_dir, meta = make_models.ensure_case(args.case, args.cache, args.seed)
            # One work folder per backend list: a backend variant may run beside the portable case.
            work = os.path.join(case_dir, "ember" + ("_" + args.backends.replace(",", "_") if args.backends else ""))
        make_cpu = time.process_time() - c0
    except Exception as e:
        print(f"FAIL: {args.case}: making the model and references failed: {type(e).__name__}: {e}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failure = None
    try:
        gap = cases.cases().get(args.case, {}).get("gap")
        if meta["kind"] == "unsupported":
            verdict = check_unsupported(args, case_dir, meta, work)
        elif gap:
            verdict = check_gap(args, case_dir, meta, gap, work)
        else:
            verdict = check_model(args, case_dir, meta, work)
    except Failure as e:
        failure = str(e)
    print(f"total {time.time() - t0:.1f} s ({'cached model' if meta.get('cached') else 'model made'}); "
          f"cpu s: python {time.process_time():.1f} (making the case {make_cpu:.1f}), "
          + ", ".join(f"{k} {v:.1f}" for k, v in CPU.items()))
    if failure:
        print(f"FAIL: {args.case}: {failure}  (kept: {work})")
        return 1
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)   # the .pte is as large as the model
        made = os.path.join(args.cache, args.case)
        size = dir_mb(made)
        if args.cache_limit_mb >= 0 and size > args.cache_limit_mb:
            shutil.rmtree(made, ignore_errors=True)   # made again next time: keeps CI disks from filling
            verdict += f"  (the {size:.0f} MB case is not kept in the cache)"
    print(verdict)
    return 0


if __name__ == "__main__":
    sys.exit(main())
