#!/usr/bin/env python3
"""Reference logits and greedy ids from Hugging Face transformers for the make_checkpoints.py
checkpoints, and how far tests/llm/reference_forward.py (numpy) is from them.

Needs torch >= 2.1 and transformers >= 4.56 (Qwen3, the `dtype` argument); runs on the CPU only:

    python3 tests/llm/make_reference_logits.py --checkpoints tests/data/llm/checkpoints --out OUT

For every checkpoint of MANIFEST.json (whose sha256 values are checked first) it
  - loads AutoModelForCausalLM.from_pretrained(dir, dtype=<the checkpoint's dtype>,
    attn_implementation="eager") on the CPU: float32, float16 or bfloat16 as stored. The FP8
    checkpoint is loaded as make_checkpoints.write_dequantized writes it: float32 weights
    f32(code) * f32(scale_inv), run in float32 (weight-only dequantization, the numpy reference's
    definition). transformers' own FP8 path (FP8Linear, dynamic FP8 activations) is also tried on
    the CPU: whether it loads the checkpoint, which modules became FP8Linear, whether their weight *
    weight_scale_inv equals our dequantization, and whether (and how closely) a forward runs;
  - runs the prompts (seeded, lengths 1, 7 and 33; Llama prompts start with <|begin_of_text|>,
    the other ids are drawn from the non-special vocabulary) one sequence at a time,
    use_cache=False;
  - greedy-decodes 16 new ids per prompt with model.generate (KV cache; do_sample False; no EOS
    stop: model.generation_config is replaced by a greedy one without eos_token_id);
  - runs reference_forward.py (float64) on the same prompts and prints the relative L2 distance
    ||hf - numpy|| / ||hf|| per prompt, and the first index where the numpy greedy ids differ.

Writes into OUT (plain files, 8 in all):
  <checkpoint>.logits.npy  float32 [1 + 7 + 33, vocab]: the logits of the prompts, stacked in order
  reference.json           seeds, versions, threads, MANIFEST hashes, and per checkpoint: the dtype
                           and path used, prompts, row ranges in the .npy, HF and numpy greedy ids,
                           the distances, inv_freq agreement, the FP8 native-path outcome.
Exit status 1 if a distance exceeds TOLERANCE (by checkpoint dtype) or generate stopped early.
"""

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference_forward as rf  # noqa: E402
from make_checkpoints import write_dequantized  # noqa: E402

TORCH_SEED = 0
PROMPT_SEED = 20261123
PROMPT_LENGTHS = (1, 7, 33)
N_NEW = 16
# Largest acceptable ||hf - numpy|| / ||hf|| per checkpoint dtype: float32 runs the same math; the
# half types round every activation in HF, not in numpy.
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2, "fp8": 1e-4}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoints", required=True,
                        help="folder written by make_checkpoints.py")
    parser.add_argument("--out", required=True, help="output folder (created)")
    parser.add_argument("--threads", type=int, default=4, help="torch CPU threads (default 4)")
    return parser.parse_args(argv)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def verified_manifest(root):
    """MANIFEST.json with every file's sha256 checked; {checkpoint: {file: sha256}}."""
    with open(os.path.join(root, "MANIFEST.json")) as f:
        files = json.load(f)["files"]
    by_checkpoint = {}
    for rel, digest in files.items():
        if sha256(os.path.join(root, rel)) != digest:
            raise SystemExit(f"{rel}: sha256 differs from MANIFEST.json; regenerate the "
                             f"checkpoints")
        name, file = rel.split("/", 1)
        by_checkpoint.setdefault(name, {})[file] = digest
    return by_checkpoint


def checkpoint_dtype(config):
    """'float32' | 'float16' | 'bfloat16' | 'fp8' (quantization_config wins over torch_dtype)."""
    if config.get("quantization_config", {}).get("quant_method") == "fp8":
        return "fp8"
    return config.get("torch_dtype") or config["dtype"]


def make_prompts(ckpt_dir, config):
    """Seeded prompts, one per PROMPT_LENGTHS entry, the same for all checkpoints of a tokenizer."""
    with open(os.path.join(ckpt_dir, "tokenizer.json"), encoding="utf-8") as f:
        first_special = min(t["id"] for t in json.load(f)["added_tokens"])
    with open(os.path.join(ckpt_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        add_bos = json.load(f).get("add_bos_token", False)
    prompts = []
    for length in PROMPT_LENGTHS:
        rng = np.random.default_rng([PROMPT_SEED, length, first_special])
        ids = rng.integers(0, first_special, length).tolist()
        prompts.append([config["bos_token_id"]] + ids[1:] if add_bos else ids)
    return prompts


def rel_l2(a, b):
    """||a - b|| / ||a|| in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))


def first_difference(a, b):
    """The first index where two id lists differ, or None."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def import_hf():
    """(torch, transformers) or SystemExit with what is missing."""
    try:
        import torch
        import transformers
    except ImportError as e:
        raise SystemExit(f"make_reference_logits.py needs torch and transformers ({e}); run it on "
                         f"the machine that has them (see tests/llm/README.md)")
    version = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    if version < (4, 56):
        raise SystemExit(f"transformers {transformers.__version__} < 4.56 (needs Qwen3 and "
                         f"`dtype`)")
    return torch, transformers


class HF:
    """transformers on the CPU, one checkpoint at a time."""

    def __init__(self, torch, transformers, threads):
        self.torch, self.transformers = torch, transformers
        torch.manual_seed(TORCH_SEED)
        torch.set_num_threads(threads)

    def load(self, ckpt_dir, dtype_name):
        torch = self.torch
        dtype = getattr(torch, dtype_name)
        model, info = self.transformers.AutoModelForCausalLM.from_pretrained(
            ckpt_dir, dtype=dtype, attn_implementation="eager", output_loading_info=True)
        unused = {key: sorted(info.get(key) or []) for key in
                  ("missing_keys", "unexpected_keys", "mismatched_keys")}
        if any(unused.values()):
            raise ValueError(f"{ckpt_dir}: tensors not loaded one to one: {unused}")
        model.eval()
        device = next(model.parameters()).device
        if model.dtype != dtype or device.type != "cpu":
            raise ValueError(f"{ckpt_dir}: loaded as {model.dtype} on {device}")
        # Greedy, no EOS stop, no sampling defaults from the checkpoint's generation_config.json.
        model.generation_config = self.transformers.GenerationConfig(
            do_sample=False, num_beams=1, max_new_tokens=N_NEW, eos_token_id=None,
            pad_token_id=None)
        return model

    def logits(self, model, ids):
        with self.torch.no_grad():
            out = model(input_ids=self.torch.tensor([ids]), use_cache=False)
        return out.logits[0].float().numpy()

    def generate(self, model, ids):
        torch = self.torch
        with torch.no_grad():
            out = model.generate(input_ids=torch.tensor([ids]),
                                 attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 do_sample=False, max_new_tokens=N_NEW)
        return out[0, len(ids):].tolist()

    @staticmethod
    def inv_freq(model):
        rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
        buffer = getattr(rotary, "inv_freq", None)
        return None if buffer is None else buffer.float().numpy()


def run_checkpoint(hf, ckpt_dir, files):
    """The reference for one checkpoint: (logits [rows, vocab] float32, record for the JSON)."""
    config = rf.load_config(ckpt_dir)
    dtype = checkpoint_dtype(config)
    prompts = make_prompts(ckpt_dir, config)
    record = {"files": files, "checkpoint_dtype": dtype, "prompts": prompts}
    with tempfile.TemporaryDirectory() as tmp:
        if dtype == "fp8":
            write_dequantized(ckpt_dir, tmp)
            model = hf.load(tmp, "float32")
            record.update(hf_dtype="float32", hf_path="dequantized to float32 (weight-only)")
        else:
            model = hf.load(ckpt_dir, dtype)
            record.update(hf_dtype=dtype, hf_path="from_pretrained")
        logits = [hf.logits(model, p) for p in prompts]
        record["hf_generated"] = [hf.generate(model, p) for p in prompts]
        hf_inv = hf.inv_freq(model)
        if dtype == "fp8":
            record["fp8_native"] = try_fp8_native(hf, ckpt_dir, config, prompts, logits,
                                                  rf.read_checkpoint_tensors(tmp))
    reference = rf.load(ckpt_dir, np.float64)
    record["inv_freq_max_rel_diff"] = (None if hf_inv is None else
                                       float(np.max(np.abs(hf_inv / reference.inv_freq - 1))))
    record["numpy_rel_l2"] = [rel_l2(lg, reference.logits(p)) for lg, p in zip(logits, prompts)]
    record["numpy_generated"] = rf.generate_greedy(reference, prompts, N_NEW)
    record["numpy_first_difference"] = [first_difference(a, b) for a, b in
                                        zip(record["hf_generated"], record["numpy_generated"])]
    rows, start = [], 0
    for lg in logits:
        rows.append([start, start + lg.shape[0]])
        start += lg.shape[0]
    record["rows"] = rows
    return np.concatenate(logits).astype(np.float32), record


def try_fp8_native(hf, ckpt_dir, config, prompts, dequantized_logits, dequantized_weights):
    """transformers' own FP8 path on the CPU. Records whether it loads the checkpoint (no missing or
    unexpected tensors), which modules became FP8 and whether their weight * scale_inv equals our
    dequantized weights, then whether a forward pass runs and how far its logits are from ours."""
    torch = hf.torch
    result = {"loaded": False, "ran": False}
    try:
        model = hf.load(ckpt_dir, "bfloat16")
        result["loaded"] = True
        bn, bk = config["quantization_config"]["weight_block_size"]
        fp8_modules, worst = [], 0.0
        for name, module in model.named_modules():
            weight = getattr(module, "weight", None)
            scale = getattr(module, "weight_scale_inv", None)
            if weight is None or scale is None or weight.dtype != torch.float8_e4m3fn:
                continue
            n, k = weight.shape
            scales = scale.detach().float().repeat_interleave(bn, 0).repeat_interleave(bk, 1)
            theirs = (weight.detach().float() * scales[:n, :k]).numpy()
            worst = max(worst, float(np.abs(theirs - dequantized_weights[name + ".weight"]).max()))
            fp8_modules.append(f"{name}: {type(module).__name__} scale_inv {list(scale.shape)} "
                               f"{str(scale.dtype).replace('torch.', '')}")
        result.update(fp8_modules=fp8_modules, max_abs_diff_to_our_dequantization=worst)
        distances = [rel_l2(d, hf.logits(model, p)) for d, p in zip(dequantized_logits, prompts)]
        result.update(ran=True, rel_l2_to_dequantized=distances)
    except Exception as e:  # noqa: BLE001 - any failure of the optional path is recorded, not fatal
        result["error"] = f"{type(e).__name__}: {str(e)[:400]}"
    return result


def main(argv=None):
    args = parse_args(argv)
    manifest = verified_manifest(args.checkpoints)
    torch, transformers = import_hf()
    hf = HF(torch, transformers, args.threads)
    os.makedirs(args.out, exist_ok=True)
    result = {"generator": "tests/llm/make_reference_logits.py", "torch_seed": TORCH_SEED,
              "prompt_seed": PROMPT_SEED, "prompt_lengths": list(PROMPT_LENGTHS), "n_new": N_NEW,
              "device": "cpu", "threads": args.threads,
              "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                           "numpy": np.__version__, "python": platform.python_version()},
              "manifest_sha256": sha256(os.path.join(args.checkpoints, "MANIFEST.json")),
              "checkpoints": {}}
    failures = []
    print(f"{'checkpoint':11s} {'hf dtype':9s} rel L2 (numpy vs HF) per prompt   "
          f"greedy: first diff")
    for name, files in manifest.items():
        logits, record = run_checkpoint(hf, os.path.join(args.checkpoints, name), files)
        record["logits_file"] = f"{name}.logits.npy"
        np.save(os.path.join(args.out, record["logits_file"]), logits, allow_pickle=False)
        result["checkpoints"][name] = record
        worst, tolerance = max(record["numpy_rel_l2"]), TOLERANCE[record["checkpoint_dtype"]]
        if worst > tolerance:
            failures.append(f"{name}: rel L2 {worst:.2e} > {tolerance:.0e}")
        lengths = [len(g) for g in record["hf_generated"]]
        if lengths != [N_NEW] * len(lengths):
            failures.append(f"{name}: generate returned {lengths} ids")
        distances = " ".join(f"{d:.2e}" for d in record["numpy_rel_l2"])
        print(f"{name:11s} {record['hf_dtype']:9s} {distances:31s}  "
              f"{record['numpy_first_difference']}  inv_freq {record['inv_freq_max_rel_diff']}")
        if "fp8_native" in record:
            native = record["fp8_native"]
            print(f"{'':11s} transformers' FP8 path: loaded {native['loaded']}, "
                  f"{len(native.get('fp8_modules', []))} FP8 modules, weight * scale_inv vs ours: "
                  f"max |diff| {native.get('max_abs_diff_to_our_dequantization')}, forward ran "
                  f"{native['ran']} {native.get('rel_l2_to_dequantized', native.get('error', ''))}")
    with open(os.path.join(args.out, "reference.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(result, indent=1, sort_keys=True) + "\n")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
