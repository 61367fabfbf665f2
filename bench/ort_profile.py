#!/usr/bin/env python3
"""onnxruntime's own per-node kernel times for one ONNX model: the peer's side of `runner --profile`.

Runs the model on onnxruntime's CPU execution provider (intra-op threads --threads) with its profiler
on, --warmup runs then --iterations timed runs, and prints each node's median kernel time (the
profiler's "<node>_kernel_time" events), slowest first, and their sum. ORT's graph optimizations
stay on (as in bench/cpu_models.py), so node names are those of the optimized graph: convolutions
show under their fused outputs ("..._nchwc" on AVX-512 machines), with batch norm and relu folded in.

  .venv/bin/python bench/ort_profile.py MODEL.onnx INPUT.npy [--threads N] [--iterations K] [--top T]
"""
import argparse
import collections
import json
import os
import statistics
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="ONNX file")
    ap.add_argument("input", help=".npy for the model's first input")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--top", type=int, default=40, help="nodes printed (default 40)")
    args = ap.parse_args()
    import numpy as np
    import onnxruntime as ort

    for path in (args.model, args.input):
        if not os.path.isfile(path):
            sys.exit(f"ort_profile.py: error: {path}: no such file")
    x = np.load(args.input)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="ort_profile_"), "ort")
    session = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for _ in range(args.warmup + args.iterations):
        session.run(None, {name: x})
    with open(session.end_profiling()) as f:
        events = json.load(f)
    times = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            times[(e["name"][: -len("_kernel_time")], e["args"].get("op_name", "?"))].append(e["dur"])
    # The last `iterations` runs of each node (the warm-up ones come first in the trace).
    rows = sorted(((statistics.median(v[-args.iterations:]), k) for k, v in times.items()), reverse=True)
    print(f"onnxruntime {ort.__version__}, {args.threads} thread(s), median of {args.iterations} runs, ms:")
    for med, (node, op) in rows[: args.top]:
        print(f"{med / 1000:8.3f}  {op:<20} {node}")
    print(f"{sum(m for m, _ in rows) / 1000:8.3f}  total over {len(rows)} nodes")


if __name__ == "__main__":
    main()
