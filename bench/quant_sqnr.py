#!/usr/bin/env python3
"""Output SQNR of quantized models against f32, per --quantize preset (issue 4's accuracy figures).

  .venv/bin/python bench/quant_sqnr.py --exporter build/release/exporter/exporter \
      --runner build/release/tools/runner/runner --cache build/release/onnx-cache [--models ...]

Uses the ONNX end-to-end cases (tests/onnx: torchvision models and the BERT-style encoder with every
parameter randomized from a seed, made by `ctest -L onnx` into the cache). For each model and preset:
export with `--quantize P` (the default selection: linears with min(N, K) >= 128; 16 for the
encoder, whose linears are 64 wide), run it with
`runner` on the case's input, and compare the output with the f32 program's output on the same
input: SQNR = 10·log10(Σ ref² / Σ (ref − q)²) in dB. Also prints how many linears were quantized,
the weight bytes of those layers before and after, and the mean per-layer weight SQNR from the
exporter's report. Random weights are not trained ones: the figures measure each format's rounding
on normally distributed weights, not a model's task accuracy.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

PRESETS = ("fp8", "fp8-block", "fp8-dynamic", "mxfp8", "nvfp4")
# The encoder's linears are 64 wide, under the default --quantize-min-size of 128: quantize them anyway.
MIN_SIZE = {"bert_encoder_opset17": 16}
MODELS = ("vit_b_16_opset17", "swin_t_opset17", "convnext_tiny_opset17", "maxvit_t_opset17",
          "mobilenet_v3_large_opset17", "resnet50_opset17", "bert_encoder_opset17")


def sqnr(ref, q):
    noise = float(np.sum((ref.astype(np.float64) - q) ** 2))
    signal = float(np.sum(ref.astype(np.float64) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(signal / noise)


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--cache", required=True, help="the build tree's onnx-cache (made by ctest -L onnx)")
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--presets", nargs="*", default=list(PRESETS))
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for case in args.models:
            case_dir = os.path.join(args.cache, case)
            if not os.path.exists(os.path.join(case_dir, "meta.json")):
                print(f"{case}: not in the cache (run its ctest case first)", file=sys.stderr)
                continue
            meta = json.load(open(os.path.join(case_dir, "meta.json")))
            run0 = meta["runs"][0]
            inputs = []
            for name, f in run0["inputs"].items():
                inputs += ["--input", f"{name}={os.path.join(case_dir, f)}"]
            shapes = []
            for s in meta.get("input_shape", []):
                shapes += ["--input-shape", s]
            out_name = meta["outputs"][0]

            def export_and_run(tag, extra):
                pte = os.path.join(work, f"{case}_{tag}.pte")
                out = run([args.exporter, os.path.join(case_dir, "model.onnx"), "-o", pte] + shapes + extra)
                od = os.path.join(work, f"{case}_{tag}_out")
                os.makedirs(od, exist_ok=True)
                run([args.runner, "--program", pte, "--output-dir", od] + inputs)
                return out, np.load(os.path.join(od, f"{out_name}.npy"))

            _, ref = export_and_run("f32", [])
            torch_ref = np.load(os.path.join(case_dir, run0["torch"][out_name]))
            for preset in args.presets:
                extra = ["--quantize", preset, "--quantize-samples", "0"]
                if case in MIN_SIZE:
                    extra += ["--quantize-min-size", str(MIN_SIZE[case])]
                report, q = export_and_run(preset, extra)
                m = re.search(r"quantize \S+: (\d+) of (\d+) linear layers; their weights (\d+) -> (\d+) bytes", report)
                layers = [float(x) for x in re.findall(r"weight SQNR\s+([-\d.inf]+) dB", report)]
                row = {"model": case, "preset": preset, "quantized": int(m.group(1)), "linears": int(m.group(2)),
                       "f32_bytes": int(m.group(3)), "q_bytes": int(m.group(4)),
                       "weight_sqnr_db": float(np.mean(layers)) if layers else float("nan"),
                       "output_sqnr_db": sqnr(ref, q), "output_sqnr_vs_torch_db": sqnr(torch_ref, q),
                       "f32_vs_torch_db": sqnr(torch_ref, ref)}
                rows.append(row)
                print(f"{case:28s} {preset:12s} {row['quantized']:3d}/{row['linears']:<3d} linears  "
                      f"{row['f32_bytes'] / 1e6:8.2f} -> {row['q_bytes'] / 1e6:7.2f} MB  "
                      f"weight {row['weight_sqnr_db']:6.2f} dB  output {row['output_sqnr_db']:6.2f} dB "
                      f"(vs torch {row['output_sqnr_vs_torch_db']:6.2f}; f32 vs torch {row['f32_vs_torch_db']:6.1f})",
                      flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
