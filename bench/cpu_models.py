#!/usr/bin/env python3
"""Ember against onnxruntime and PyTorch eager on the CPU, side by side on the same ONNX files.

Each model is built with random weights (torchvision's architectures with weights=None, ViT's
zero-initialized head redrawn from N(0, 0.02^2), and a BERT-base encoder: 12 layers, hidden 768, 12 heads, FFN 3072, exact GELU, input hidden states
[1, 128, 768]), exported once to ONNX (opset 17, batch 1; kept in WORK) and from there to an Ember program (on every
run, so the program always comes from the exporter being measured). Then,
per thread count, rounds alternate the runtimes (the order rotates each round): Ember is one
`runner --program X.pte --input x.npy --iterations K --threads T` process per round (its printed
median; load time excluded), onnxruntime one InferenceSession (intra-op threads T, inter-op 1) and
PyTorch one torch.inference_mode() call loop (torch.set_num_threads(T)), K timed iterations each after
one warm-up. Reported: the median over rounds of each runtime's per-round median, Ember / peer ratios,
and the relative L2 of Ember's output against onnxruntime's. Nothing is asserted: this is a benchmark.

Usage (from the repository root, after building):
  .venv/bin/python bench/cpu_models.py                       # every model, threads 1 and 2
  .venv/bin/python bench/cpu_models.py --models resnet18 --threads 1 --rounds 3 --iterations 5
Options: --bin (folder with runner and exporter, a build tree or flat; default build/release),
--work (models and programs; default /tmp/ember_cpu_bench), --out (report folder; default WORK),
--backends (runner --backends, e.g. xnnpack,portable), --export-backends / --manifest (the exporter's),
--peers (ort,torch). Without torchvision (the lent GPU machine) the CNNs and ViT come from
fallback_model(): the same layers and parameter counts.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MODELS = ("resnet18", "mobilenet_v2", "vit_b_16", "bert_base")


def cpu_line():
    name, flags = platform.processor() or "?", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and name in ("?", "", "x86_64"):
                    name = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "NEON" if platform.machine() == "aarch64" else "?"
    return f"{name}, {os.cpu_count()} cores, SIMD {simd}"


def tool(bin_dir, name):
    for rel in (name, os.path.join("tools", "runner", name), os.path.join("exporter", name)):
        p = os.path.join(bin_dir, rel)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    sys.exit(f"cpu_models.py: no {name} in {bin_dir} (build it, or pass --bin)")


def build_model(name):
    import torch
    from torch import nn
    torch.manual_seed(0)
    if name == "bert_base":
        layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True)
        model = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
        x = torch.randn(1, 128, 768)
    else:
        try:
            import torchvision
            model = getattr(torchvision.models, name)(weights=None)
            if name == "vit_b_16":  # torchvision zero-initializes the head: every output would be 0
                nn.init.normal_(model.heads.head.weight, std=0.02)
        except ImportError:  # e.g. the lent GPU machine: the same architectures, defined here
            model = fallback_model(name)
        x = torch.randn(1, 3, 224, 224)
    return model.eval(), x


def fallback_model(name):
    """ResNet-18, MobileNetV2 and ViT-B/16 as torchvision defines them (layer for layer; parameter
    names differ), for machines without torchvision."""
    import torch
    from torch import nn

    def cbr(cin, cout, k, s, groups=1, act=nn.ReLU):
        return [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)] + \
            ([act()] if act else [])

    if name == "resnet18":
        class Basic(nn.Module):
            def __init__(self, cin, cout, s):
                super().__init__()
                self.body = nn.Sequential(*cbr(cin, cout, 3, s), *cbr(cout, cout, 3, 1, act=None))
                self.down = nn.Sequential(*cbr(cin, cout, 1, s, act=None)) if s != 1 or cin != cout else nn.Identity()

            def forward(self, x):
                return torch.relu(self.body(x) + self.down(x))
        layers, cin = [], 64
        for cout, s in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [Basic(cin, cout, s), Basic(cout, cout, 1)]
            cin = cout
        return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                             nn.MaxPool2d(3, 2, 1), *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(512, 1000))
    if name == "mobilenet_v2":
        class Inverted(nn.Module):
            def __init__(self, cin, cout, s, t):
                super().__init__()
                hidden = cin * t
                body = (cbr(cin, hidden, 1, 1, act=nn.ReLU6) if t != 1 else []) + \
                    cbr(hidden, hidden, 3, s, groups=hidden, act=nn.ReLU6) + cbr(hidden, cout, 1, 1, act=None)
                self.body, self.res = nn.Sequential(*body), s == 1 and cin == cout

            def forward(self, x):
                return x + self.body(x) if self.res else self.body(x)
        blocks, cin = cbr(3, 32, 3, 2, act=nn.ReLU6), 32
        for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                           (6, 160, 3, 2), (6, 320, 1, 1)):
            for i in range(n):
                blocks.append(Inverted(cin, c, s if i == 0 else 1, t))
                cin = c
        blocks += cbr(320, 1280, 1, 1, act=nn.ReLU6)
        return nn.Sequential(*blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(1280, 1000))
    if name == "vit_b_16":
        class ViT(nn.Module):
            def __init__(self):
                super().__init__()
                self.patch = nn.Conv2d(3, 768, 16, 16)
                self.cls = nn.Parameter(torch.zeros(1, 1, 768))
                self.pos = nn.Parameter(torch.randn(1, 197, 768) * 0.02)
                layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu",
                                                   batch_first=True, norm_first=True)
                self.encoder = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
                self.norm, self.head = nn.LayerNorm(768, eps=1e-6), nn.Linear(768, 1000)

            def forward(self, x):
                x = self.patch(x).flatten(2).transpose(1, 2)
                x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
                return self.head(self.norm(self.encoder(x))[:, 0])
        return ViT()
    raise ValueError(name)


def export_onnx(model, x, path):
    import torch
    kwargs = dict(input_names=["input"], output_names=["output"], opset_version=17)
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)  # torch >= 2.5: the TorchScript exporter
    except TypeError:
        torch.onnx.export(model, (x,), path, **kwargs)


def prepare(args, name, exporter):
    d = os.path.join(args.work, name)
    os.makedirs(d, exist_ok=True)
    tag = args.export_backends.replace(",", "-") if args.export_backends else "default"
    onnx_path, pte, x_path = (os.path.join(d, f) for f in ("model.onnx", f"model.{tag}.pte", "input.npy"))
    model, x = build_model(name)
    if not os.path.isfile(onnx_path):
        export_onnx(model, x, onnx_path)
    np.save(x_path, x.numpy())
    # The program is exported on every run (seconds), so it never lags the exporter being measured.
    cmd = [exporter, onnx_path, "-o", pte]
    if args.export_backends:
        cmd += ["--backends", args.export_backends]
    if args.manifest:
        cmd += ["--manifest", args.manifest]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"export failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}"
    print(f"{name}: exported in {time.time() - t0:.1f} s", flush=True)
    return {"dir": d, "onnx": onnx_path, "pte": pte, "x": x_path, "model": model, "input": x}, None


def time_ember(args, runner, m, threads, iters, out_dir=None):
    cmd = [runner, "--program", m["pte"], "--input", m["x"], "--iterations", str(iters), "--threads", str(threads)]
    if args.backends:
        cmd += ["--backends", args.backends]
    if out_dir:
        cmd += ["--output-dir", out_dir]
    p = subprocess.run(cmd, capture_output=True, text=True)
    found = re.search(r"latency: median ([0-9.]+) ms", p.stdout + p.stderr)
    if p.returncode != 0 or not found:
        raise RuntimeError(f"runner failed (rc {p.returncode}): {(p.stderr or p.stdout).strip()[-300:]}")
    return float(found.group(1))


def time_loop(fn, iters):
    fn()  # warm-up
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def bench_model(args, runner, m, threads):
    import torch
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(m["onnx"], so, providers=["CPUExecutionProvider"])
    x = np.load(m["x"])
    torch.set_num_threads(threads)
    runs = {"ember": lambda: time_ember(args, runner, m, threads, args.iterations),
            "ort": lambda: time_loop(lambda: sess.run(None, {"input": x}), args.iterations)}
    if "torch" in args.peers:
        def torch_round():
            with torch.inference_mode():
                return time_loop(lambda: m["model"](m["input"]), args.iterations)
        runs["torch"] = torch_round
    order = ["ember"] + [p for p in ("ort", "torch") if p in runs]
    medians = {k: [] for k in order}
    for r in range(args.rounds):
        for k in order[r % len(order):] + order[:r % len(order)]:
            medians[k].append(runs[k]())
    out_dir = os.path.join(m["dir"], "ember_out")
    os.makedirs(out_dir, exist_ok=True)
    time_ember(args, runner, m, threads, 1, out_dir)
    ember_out = np.load(os.path.join(out_dir, sorted(os.listdir(out_dir))[0]))
    ort_out = sess.run(None, {"input": x})[0]
    return {k: statistics.median(v) for k, v in medians.items()}, {k: v for k, v in medians.items()}, rel_l2(ember_out, ort_out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help="any of " + ", ".join(MODELS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=4, help="timed iterations per runtime and round")
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--work", default="/tmp/ember_cpu_bench")
    ap.add_argument("--out", default=None)
    ap.add_argument("--backends", default="", help="runner --backends (default: the program's)")
    ap.add_argument("--export-backends", default="", help="exporter --backends (default: the exporter's)")
    ap.add_argument("--manifest", default="", help="exporter --manifest (default: the exporter's built-in path)")
    ap.add_argument("--peers", default="ort,torch")
    args = ap.parse_args(argv)
    args.peers = args.peers.split(",")
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        ap.error(f"unknown model {', '.join(unknown)} (models: {', '.join(MODELS)})")
    os.makedirs(args.work, exist_ok=True)
    out = args.out or args.work
    os.makedirs(out, exist_ok=True)
    runner, exporter = tool(args.bin, "runner"), tool(args.bin, "exporter")
    import onnxruntime as ort
    import torch
    machine = cpu_line()
    print(f"machine: {machine}; onnxruntime {ort.__version__}, torch {torch.__version__}", flush=True)
    rows, records = [], []
    for name in args.models.split(","):
        m, err = prepare(args, name, exporter)
        for t in (int(v) for v in args.threads.split(",")):
            if m is None:
                rows.append(f"| {name} | {t} | {err} | | | | | |")
                continue
            try:
                med, per_round, err_l2 = bench_model(args, runner, m, t)
            except RuntimeError as e:
                rows.append(f"| {name} | {t} | {e} | | | | | |")
                print(f"{name} t{t}: {e}", flush=True)
                continue
            ratio = lambda k: f"{med['ember'] / med[k]:.2f}×" if k in med else "—"
            rows.append(f"| {name} | {t} | {med['ember']:.1f} | {med['ort']:.1f} | "
                        f"{med['torch']:.1f} | {ratio('ort')} | {ratio('torch')} | {err_l2:.1e} |"
                        if "torch" in med else
                        f"| {name} | {t} | {med['ember']:.1f} | {med['ort']:.1f} | — | {ratio('ort')} | — | {err_l2:.1e} |")
            records.append({"model": name, "threads": t, "median_ms": med, "round_medians_ms": per_round,
                            "rel_l2_vs_ort": err_l2})
            print(rows[-1], flush=True)
    header = ("| model | threads | Ember ms | onnxruntime ms | PyTorch eager ms | Ember / ORT | Ember / PyTorch | "
              "rel L2 vs ORT |\n|---|---|---|---|---|---|---|---|")
    report = (f"machine: {machine}; onnxruntime {ort.__version__}, torch {torch.__version__}; "
              f"{args.rounds} rounds x {args.iterations} iterations, alternating\n\n" + header + "\n" + "\n".join(rows) + "\n")
    with open(os.path.join(out, "cpu_models.md"), "w") as f:
        f.write(report)
    with open(os.path.join(out, "cpu_models.json"), "w") as f:
        json.dump({"machine": machine, "records": records}, f, indent=1)
    print("\n" + report)


if __name__ == "__main__":
    sys.exit(main())
