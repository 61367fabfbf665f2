#!/usr/bin/env python3
"""Real ONNX models from PyPI wheels (models.json): export with Ember, run, compare with onnxruntime.

  .venv/bin/python tests/real_models/run_real_models.py --exporter EXPORTER --runner RUNNER \
      [--cache DIR] [--only ID,...] [--strict] [--keep]

For each model in the cache (scripts/fetch_models.py puts them there): make a seeded input of the
kind models.json says (an image in the range the model's package feeds, an audio chunk, token ids
below the vocabulary size with a 0/1 mask, ...), run it with onnxruntime, export the model with
`exporter MODEL -o X.pte --input-shape ...`, run the program with `runner` on the same input and
compare every output: float outputs by relative L2 error and max abs error against the model's
tolerance, integer and bool outputs exactly. One line per model:

  ID  match | mismatch | refused-at-export | run-failed | reference-failed | missing-from-cache  numbers/why

A refused model also prints the exporter's error and every op of the model the importer cannot
take today (op_inventory.py, which reads the importer's tables). Exit status: 1 when a model
mismatches or fails to run (or, with --strict, is refused or missing), 77 (ctest's skip code) when
none of the selected models is in the cache, else 0.
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests", "onnx"))
import fetch_models  # noqa: E402
import make_models  # noqa: E402  (rel_l2, ort_run)
import op_inventory  # noqa: E402
from run_model_test import Failure, run_tool, tail  # noqa: E402

SKIP = 77   # ctest's SKIP_RETURN_CODE for this test (tests/real_models/CMakeLists.txt)
SEED = 20241117
DTYPES = {"float32": np.float32, "int64": np.int64, "int32": np.int32, "bool": np.bool_}


# ---- Inputs ------------------------------------------------------------------------------------

def synthetic_image(rng, n, c, h, w):
    """A document-like picture in [0, 1]: a light, smoothly shaded page with a few filled boxes and
    lines of dark "glyphs" (clusters of strokes), so that text detectors find text and classifiers
    see structure rather than noise."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.empty((n, c, h, w))
    for b in range(n):
        for ch in range(c):
            f = rng.uniform(0.5, 2.0, size=2) * np.pi / np.array([h, w])
            img[b, ch] = 0.85 + 0.1 * np.cos(f[0] * y + rng.uniform(0, 6)) * np.cos(f[1] * x + rng.uniform(0, 6))
        for _ in range(3):
            y0, x0 = rng.integers(0, h), rng.integers(0, w)
            img[b, :, y0:y0 + rng.integers(h // 10 + 1, h // 4 + 2), x0:x0 + rng.integers(w // 10 + 1, w // 4 + 2)] = \
                rng.uniform(0.4, 1, size=(c, 1, 1))
        size = max(4, min(h, w) // 12)                      # glyph height in pixels
        for top in range(size // 2, h - size, 2 * size):     # text lines
            x0 = int(rng.integers(0, max(1, w // 6)))
            x1 = int(rng.integers(w // 2, w + 1))
            ink = rng.uniform(0, 0.25)
            for gx in range(x0, x1 - size, size * 3 // 4):   # glyphs
                if rng.uniform() < 0.15:
                    continue                                 # a space between words
                for _ in range(int(rng.integers(2, 4))):     # strokes of one glyph
                    if rng.uniform() < 0.5:
                        sx, sy = gx + int(rng.integers(0, size // 2)), top
                        img[b, :, sy:sy + size, sx:sx + max(1, size // 6)] = ink
                    else:
                        sx, sy = gx, top + int(rng.integers(0, size - 1))
                        img[b, :, sy:sy + max(1, size // 6), sx:sx + size // 2] = ink
    return np.clip(img + rng.normal(0, 0.02, img.shape), 0, 1)


def synthetic_audio(rng, shape, amplitude):
    """Three tones (100 Hz .. 3 kHz at 16 kHz) plus noise, peak `amplitude`."""
    t = np.arange(shape[-1]) / 16000.0
    out = np.zeros(shape)
    for idx in np.ndindex(*shape[:-1]):
        s = sum(rng.uniform(0.2, 1) * np.sin(2 * np.pi * rng.uniform(100, 3000) * t + rng.uniform(0, 6)) for _ in range(3))
        s = s + 0.1 * rng.standard_normal(t.size)
        out[idx] = s / np.max(np.abs(s)) * amplitude
    return out


def make_input(spec, rng):
    g, shape = spec["gen"], tuple(spec["shape"])
    kind = g["kind"]
    if kind == "image":
        x = synthetic_image(rng, *shape)
        if "mean" in g:
            x = (x - np.array(g["mean"]).reshape(1, -1, 1, 1)) / np.array(g["std"]).reshape(1, -1, 1, 1)
    elif kind == "audio":
        x = synthetic_audio(rng, shape, g["amplitude"])
    elif kind == "uniform":
        x = rng.uniform(g["low"], g["high"], size=shape)
    elif kind == "normal":
        x = rng.normal(g.get("mean", 0.0), g["std"], size=shape)
    elif kind == "const":
        x = np.full(shape, g["value"])
    elif kind == "tokens":
        # Ids in [low, high), optionally framed by first/last ([CLS] ... [SEP]), then pad_tail pads.
        x = rng.integers(g["low"], g["high"], size=shape)
        valid = shape[-1] - g.get("pad_tail", 0)
        if "first" in g:
            x[..., 0] = g["first"]
        if "last" in g:
            x[..., valid - 1] = g["last"]
        x[..., valid:] = g.get("pad", 0)
    elif kind == "tail_mask":
        valid = shape[-1] - g["pad_tail"]
        x = np.zeros(shape, dtype=bool)
        x[..., valid:] = True
        if g["true_where"] == "token":
            x = ~x
    else:
        raise ValueError(f"input '{spec['name']}': unknown gen kind '{kind}'")
    return np.asarray(x).astype(DTYPES[spec["dtype"]])


def make_inputs(model, seed):
    rng = np.random.default_rng(seed + zlib.crc32(model["id"].encode()))
    return {s["name"]: make_input(s, rng) for s in model["inputs"]}


# ---- Ember ---------------------------------------------------------------------------------------

def written_outputs(stdout):
    """{output name: .npy path} from the runner's `--output-dir` lines: "    wrote PATH" for an output
    named after its file, "    wrote PATH (output 'NAME': its name is not a plain file name)" for one
    whose name the runner made safe ('/' and the like)."""
    files = {}
    for line in stdout.splitlines():
        m = re.match(r"^\s+wrote (.*?)(?: \(output '(.*)': its name is not a plain file name\))?$", line)
        if m:
            name = m.group(2) if m.group(2) is not None else os.path.basename(m.group(1))[:-len(".npy")]
            files[name] = m.group(1)
    return files


def compare(ember, ref, tol):
    """(ok, text) for one output."""
    if ember.shape != ref.shape:
        return False, f"shape {list(ember.shape)}, onnxruntime's is {list(ref.shape)}"
    if ref.dtype.kind in "biu":
        if ember.dtype.kind not in "biu":
            return False, f"dtype {ember.dtype}, onnxruntime's is {ref.dtype}"
        bad = int(np.count_nonzero(ember.astype(np.int64) != ref.astype(np.int64)))
        return bad == 0, f"exact: {bad} of {ref.size} differ"
    e = make_models.rel_l2(ember, ref)
    m = float(np.max(np.abs(ember.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
    ok = np.isfinite(e) and e <= tol["rel_l2"] and ("max_abs" not in tol or m <= tol["max_abs"])
    return ok, f"rel L2 {e:.3g}, max abs {m:.3g}"


def run_model(model, args, cache):
    """(status, text, details) for one model."""
    path = fetch_models.model_path(model, cache)
    if not fetch_models.is_cached(model, cache):
        why = "not there" if not os.path.exists(path) else "wrong sha256"
        return "missing-from-cache", f"{path}: {why}; run scripts/fetch_models.py --only {model['id']}", []
    work = os.path.join(args.work, model["id"])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "out"))
    feeds = make_inputs(model, args.seed)
    try:
        ref = make_models.ort_run(path, feeds)
    except Exception as e:  # noqa: BLE001 - any onnxruntime error means models.json's inputs are wrong
        return "reference-failed", f"onnxruntime: {type(e).__name__}: {str(e).splitlines()[0]}", []
    pte = os.path.join(work, "model.pte")
    cmd = [args.exporter, path, "-o", pte]
    for s in model["input_shape"]:
        cmd += ["--input-shape", s]
    # Inputs fixed at export (exporter --input-value; e.g. silero-vad's sample rate, on which an If
    # depends): the same value goes to onnxruntime, and the runner does not take them.
    bound = {v.split("=", 1)[0] for v in model.get("input_value", [])}
    for v in model.get("input_value", []):
        cmd += ["--input-value", v]
    p, dt_export = run_tool(cmd, args.timeout)
    if p.returncode != 0:
        # The exporter's error: a first line (how many nodes failed, by op) and one line per node.
        lines = [s for s in (p.stderr.strip() or p.stdout.strip() or "(no message)").splitlines() if s.strip()]
        errors = [s for s in lines if "error:" in s or s.startswith("  onnx:")] or lines[-1:]
        first = errors[0].split("error: ", 1)[-1]
        gaps = op_inventory.gap_summary(op_inventory.analyze(path))
        details = [s.strip() for s in errors[1:]] + [f"every importer gap (op_inventory.py): {gaps or 'none found'}"]
        if p.returncode != 1:   # a crash or an abort is a bug whatever the model holds
            return "export-crashed", f"exit {p.returncode}: {first}", details + [tail(p.stderr + p.stdout)]
        return "refused-at-export", first, details
    cmd = [args.runner, "--program", pte, "--output-dir", os.path.join(work, "out"), "--threads", str(args.threads)]
    for i, (name, x) in enumerate(feeds.items()):
        if name in bound:
            continue
        f = os.path.join(work, f"input{i}.npy")
        np.save(f, x)
        cmd += ["--input", f"{name}={f}"]
    p, dt_run = run_tool(cmd, args.timeout)
    if p.returncode != 0:
        err = (p.stderr.strip() or p.stdout.strip() or "(no message)").splitlines()[-1]
        return "run-failed", f"runner exit {p.returncode}: {err}", [tail(p.stderr + p.stdout)]
    details, worst, worst_abs, ok_all = [], 0.0, 0.0, True
    written = written_outputs(p.stdout)
    for name, r in ref.items():
        f = written.get(name)
        if f is None or not os.path.exists(f):
            ok_all = False
            details.append(f"{name}: the runner wrote no file for it")
            continue
        ok, text = compare(np.load(f), r, model["tolerance"])
        ok_all &= ok
        details.append(f"{name} {list(r.shape)} {r.dtype}: {text}  {'ok' if ok else 'FAIL'}")
        m = re.search(r"rel L2 (\S+), max abs (\S+)", text)
        if m:
            worst, worst_abs = max(worst, float(m.group(1))), max(worst_abs, float(m.group(2)))
    summary = (f"{len(ref)} output(s), worst rel L2 {worst:.3g}, max abs {worst_abs:.3g} "
               f"(tolerance {model['tolerance']}); export {dt_export:.2f} s, run {dt_run:.2f} s")
    if ok_all and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return ("match" if ok_all else "mismatch"), summary, details


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--cache", help="model cache (default $EMBER_MODEL_CACHE, else ~/.cache/ember/models)")
    ap.add_argument("--only", default="", help="comma-separated model ids (default: all)")
    ap.add_argument("--strict", action="store_true", help="a model refused at export or missing from the cache fails")
    ap.add_argument("--keep", action="store_true", help="keep every model's work folder (a failed one is always kept)")
    ap.add_argument("--work", help="work folder (default: a new temporary one)")
    ap.add_argument("--threads", type=int, default=1, help="runner --threads")
    ap.add_argument("--timeout", type=int, default=600, help="seconds for each exporter/runner call")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("-v", "--verbose", action="store_true", help="per-output numbers for every model")
    ap.add_argument("--table", default=fetch_models.TABLE, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cache = fetch_models.cache_dir(args.cache)
    try:
        models = fetch_models.select(fetch_models.load_table(args.table), args.only)
    except ValueError as e:
        print(f"run_real_models: {e}", file=sys.stderr)
        return 2
    present = [m for m in models if os.path.exists(fetch_models.model_path(m, cache))]
    if not present:
        print(f"SKIP: none of the {len(models)} selected real model(s) is in the cache {cache}; "
              f"fetch them with: .venv/bin/python scripts/fetch_models.py{' --cache ' + cache if args.cache else ''}")
        return SKIP
    import onnxruntime
    onnxruntime.set_default_logger_severity(3)   # errors only: SLANet's Loop warns once per step
    made_work = args.work is None
    args.work = args.work or tempfile.mkdtemp(prefix="ember-real-models-")
    counts, failed = {}, False
    t0 = time.time()
    for m in models:
        try:
            status, text, details = run_model(m, args, cache)
        except Failure as e:   # a tool timed out
            status, text, details = "run-failed", str(e), []
        counts[status] = counts.get(status, 0) + 1
        bad = status not in ("match", "refused-at-export", "missing-from-cache") or \
            (args.strict and status != "match")
        failed |= bad
        print(f"{m['id']:28} {status:18} {text}", flush=True)
        if bad or args.verbose or status == "refused-at-export":
            for d in details:
                print(f"{'':30}{d}")
        if bad and status not in ("missing-from-cache",):
            print(f"{'':30}(kept: {os.path.join(args.work, m['id'])})")
    print(f"real models: {', '.join(f'{v} {k}' for k, v in counts.items())} in {time.time() - t0:.1f} s")
    if made_work and not failed and not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
