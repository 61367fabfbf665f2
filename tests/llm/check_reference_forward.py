#!/usr/bin/env python3
"""Self-consistency checks of tests/llm/reference_forward.py on the make_checkpoints.py checkpoints.

    /work/main/.venv/bin/python tests/llm/check_reference_forward.py \
        --checkpoints tests/data/llm/checkpoints [--hf-reference tests/data/llm/hf_reference]

Checks (exit status 1 if any fails; prints the measured values):
  - the checkpoints are what make_checkpoints.py writes now (regenerated into a temporary folder:
    every sha256 equals MANIFEST.json's, and MANIFEST.json itself is the same);
  - every checkpoint's file hashes equal MANIFEST.json's;
  - the logits of a prefix equal the first rows of the logits of the whole sequence (float64:
    max |diff| <= 1e-9 relative to the logits' scale);
  - float32 math is within 1e-5 relative L2 of float64 math;
  - the logits spread: standard deviation per row between 1 and 5;
  - generate_greedy equals the argmax of the one-pass logits of prompt + generated ids;
  - qwen3_fp8 computes the same logits (float64, exact up to summation order: 1e-12) as an
    independent float32 checkpoint of its dequantized weights (make_checkpoints.write_dequantized);
    its distance to qwen3_bf16 (same master weights, no quantization) is printed and must be below
    0.3 but above 1e-4 (e4m3 keeps 3 mantissa bits: about 4% rms per weight; seen 0.11);
  - with --hf-reference: the numpy logits are within make_reference_logits.TOLERANCE of the stored
    transformers logits, the numpy greedy ids equal the recorded ones, and for the float32 runs
    (the FP8 checkpoint included) equal transformers' generate() too;
  - llama_f32 with rope_scaling removed from its config differs by more than 1e-3 (so a test would
    notice an importer that ignores rope_scaling), and its inv_freq has 2 kept, 1 interpolated and
    13 divided frequencies.
"""

import argparse
import copy
import hashlib
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_checkpoints  # noqa: E402
import make_reference_logits  # noqa: E402
import reference_forward as rf  # noqa: E402

SEED = 7
PREFIX = 11
LENGTH = 40


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


class Checker:
    def __init__(self):
        self.failures = 0

    def expect(self, ok, what):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
        self.failures += 0 if ok else 1


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_regeneration(c, ckpt_root):
    print("regeneration")
    with tempfile.TemporaryDirectory() as tmp:
        make_checkpoints.main(["--out", tmp])
        same = sha256(os.path.join(tmp, "MANIFEST.json")) == sha256(
            os.path.join(ckpt_root, "MANIFEST.json"))
        c.expect(same, "make_checkpoints.py writes the same MANIFEST.json again")
    with open(os.path.join(ckpt_root, "MANIFEST.json")) as f:
        files = json.load(f)["files"]
    bad = [rel for rel, digest in files.items() if sha256(os.path.join(ckpt_root, rel)) != digest]
    c.expect(not bad, f"{len(files)} files match MANIFEST.json {bad[:3] if bad else ''}")


def check_variant(c, ckpt_dir, rng):
    name = os.path.basename(ckpt_dir)
    m64 = rf.load(ckpt_dir, np.float64)
    m32 = rf.load(ckpt_dir, np.float32)
    ids = rng.integers(0, m64.vocab_size, LENGTH).tolist()
    full = m64.logits(ids)
    prefix_diff = np.abs(m64.logits(ids[:PREFIX]) - full[:PREFIX]).max() / np.abs(full).max()
    c.expect(prefix_diff <= 1e-9,
             f"{name}: prefix logits = first rows (max rel diff {prefix_diff:.1e})")
    d32 = rel_l2(m32.logits(ids), full)
    c.expect(d32 <= 1e-5, f"{name}: float32 vs float64 math rel L2 {d32:.1e}")
    std = full.std(axis=-1)
    top2 = np.sort(full, axis=-1)[:, -2:]
    c.expect(1 <= std.min() and std.max() <= 5,
             f"{name}: logit std per row {std.min():.2f}..{std.max():.2f}, "
             f"top-2 gap median {np.median(top2[:, 1] - top2[:, 0]):.3f}")
    prompt = ids[:5]
    new = rf.generate_greedy(m64, [prompt], 12)[0]
    forced = m64.logits(prompt + new).argmax(axis=-1)[len(prompt) - 1:-1].tolist()
    c.expect(forced == new, f"{name}: greedy ids = argmax of the one-pass logits ({len(set(new))} "
                            f"distinct of 12: {new})")
    return ids


def check_fp8(c, ckpt_root, ids):
    print("fp8")
    fp8 = rf.load(os.path.join(ckpt_root, "qwen3_fp8"))
    with tempfile.TemporaryDirectory() as tmp:
        make_checkpoints.write_dequantized(os.path.join(ckpt_root, "qwen3_fp8"), tmp)
        deq = rf.load(tmp)
    d = rel_l2(fp8.logits(ids), deq.logits(ids))
    c.expect(d <= 1e-12, f"qwen3_fp8 vs its dequantized float32 checkpoint: rel L2 {d:.1e}")
    d = rel_l2(fp8.logits(ids), rf.load(os.path.join(ckpt_root, "qwen3_bf16")).logits(ids))
    c.expect(1e-4 < d < 0.3, f"qwen3_fp8 vs qwen3_bf16 (quantization error): rel L2 {d:.2e}")


def check_rope_scaling(c, ckpt_root, ids):
    print("llama3 rope scaling")
    ckpt_dir = os.path.join(ckpt_root, "llama_f32")
    config = rf.load_config(ckpt_dir)
    tensors = rf.read_checkpoint_tensors(ckpt_dir)
    plain_config = copy.deepcopy(config)
    plain_config["rope_scaling"] = None
    plain = rf.Model(plain_config, tensors)
    scaled = rf.Model(config, tensors)
    ratio = plain.inv_freq / scaled.inv_freq
    counts = [int(np.sum(np.isclose(ratio, 1))), int(np.sum((ratio > 1.001) & (ratio < 7.999))),
              int(np.sum(np.isclose(ratio, 8)))]
    c.expect(counts == [2, 1, 13], f"inv_freq kept / interpolated / divided by 8: {counts}")
    d = rel_l2(plain.logits(ids), scaled.logits(ids))
    c.expect(d > 1e-3, f"logits without rope_scaling differ: rel L2 {d:.2e}")


def check_hf_reference(c, ckpt_root, ref_dir):
    """The numpy forward against the stored transformers logits of make_reference_logits.py."""
    print(f"transformers reference in {ref_dir}")
    with open(os.path.join(ref_dir, "reference.json")) as f:
        ref = json.load(f)
    c.expect(ref["manifest_sha256"] == sha256(os.path.join(ckpt_root, "MANIFEST.json")),
             f"made from these checkpoints (transformers {ref['versions']['transformers']}, "
             f"torch {ref['versions']['torch']})")
    for name, record in ref["checkpoints"].items():
        model = rf.load(os.path.join(ckpt_root, name))
        logits = np.load(os.path.join(ref_dir, record["logits_file"]))
        worst = max(rel_l2(model.logits(p), logits[a:b])
                    for p, (a, b) in zip(record["prompts"], record["rows"]))
        tolerance = make_reference_logits.TOLERANCE[record["checkpoint_dtype"]]
        c.expect(worst <= tolerance, f"{name}: numpy vs {record['hf_dtype']} transformers: "
                                     f"max rel L2 {worst:.1e} (tolerance {tolerance:.0e})")
        ids = rf.generate_greedy(model, record["prompts"], ref["n_new"])
        same_as_hf = ids == record["hf_generated"]
        must_match_hf = record["hf_dtype"] == "float32"
        c.expect(ids == record["numpy_generated"] and (same_as_hf or not must_match_hf),
                 f"{name}: greedy ids as recorded; equal to transformers' {same_as_hf}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoints", required=True,
                        help="folder written by make_checkpoints.py")
    parser.add_argument("--hf-reference", help="folder written by make_reference_logits.py")
    args = parser.parse_args(argv)
    c = Checker()
    check_regeneration(c, args.checkpoints)
    rng = np.random.default_rng(SEED)
    ids_by_name = {}
    for name in make_checkpoints.VARIANTS:
        print(name)
        ids_by_name[name] = check_variant(c, os.path.join(args.checkpoints, name), rng)
    check_fp8(c, args.checkpoints, ids_by_name["qwen3_fp8"])
    check_rope_scaling(c, args.checkpoints, ids_by_name["llama_f32"])
    if args.hf_reference:
        check_hf_reference(c, args.checkpoints, args.hf_reference)
    print(f"{c.failures} failure(s)")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
