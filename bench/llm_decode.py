#!/usr/bin/env python3
"""Decode tokens/s of a Qwen2.5-0.5B-shaped model (random weights) against the read-bandwidth roofline.

    /work/main/.venv/bin/python bench/llm_decode.py --bin /work/bench-llm/bin --work /work/bench-llm

Steps (issue 5):
  1. compiles bench/read_bandwidth.c into WORK and measures the read bandwidth (sum of a 1 GiB
     float array, 1 and 2 threads, best of 5);
  2. writes WORK/qwen05b: a Qwen2ForCausalLM checkpoint shaped as Qwen2.5-0.5B (hidden 896,
     24 layers, 14 / 2 heads x 64, intermediate 4864, vocab 151936, tied embeddings, q/k/v biases)
     with random bf16 weights N(0, 0.02^2) (norm weights 1), and the tokenizer of a tiny Qwen2 test
     checkpoint (1153 ids), padded with special added tokens <|pad_ID|> up to the model's 151936
     ids: the exporter accepts the unpadded tokenizer, but the runner stops at the first sampled id
     it cannot detokenize ("detokenizing: InvalidArgument: tokenizer: stream decode: id 62362 is not
     a token (1153 tokens)"), and random weights sample ids all over the vocabulary (the real
     Qwen2.5 tokenizer also has fewer ids, 151665, than vocab_size);
  3. exports it three times (bf16, --quantize fp8, --quantize nvfp4) with --max-seqs 8
     --max-tokens 256 --max-context 512, timing each export;
  4. runs `runner --prompts-file` with 1 and 8 prompts of PROMPT_TOKENS tokens each (BOS included,
     so 8 prompts fill exactly one 256-token prefill step), --max-new-tokens N --ignore-eos, with
     1 and 2 threads, and parses the runner's "prefill: ...; decode: X tokens in Y s (Z tok/s)" line;
  5. prints decode tok/s next to the roofline: per decode step every weight is streamed once for
     the whole batch, so
        bytes/step = linear weights in their stored format (q, k, v, o, gate, up, down of every
                     layer and the tied LM head [vocab, hidden]; codes + scales) + biases and norms
                     (f32) + the gathered embedding rows (batch x hidden bf16)
                     + KV read (batch x context x layers x 2 x kv_heads x head_dim x 2 bytes, bf16 KV,
                     context = prompt + N / 2)
        roofline tok/s = bandwidth x batch / bytes/step, where bandwidth is the mean of two 1 GiB
        read-bandwidth measurements with the same thread count just before and just after the run
        (the bandwidth of this shared VM drifts by tens of percent within minutes, bench/README.md).

The table also gives the linear layers' achieved compute, decode GFLOP/s = 2 x weights x decode tok/s
(batch 8 is compute-bound on this machine long before it reaches the bandwidth roofline).

Formats: bf16 = 2 B per weight; fp8 (per channel) = 1 B per weight + an f32 scale per output row;
nvfp4 = 0.5 B per weight + a ue4m3 scale per 16 weights + an f32 global scale per tensor. In the
quantized programs the LM head is quantized like the other linears (the exporter's report lists it)
and the embedding table stays bf16.

Results go to WORK/results.json as well. --cleanup deletes the checkpoint and programs at the end.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zlib

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 20261122

CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "hidden_act": "silu",
    "hidden_size": 896,
    "initializer_range": 0.02,
    "intermediate_size": 4864,
    "max_position_embeddings": 32768,
    "max_window_layers": 24,
    "model_type": "qwen2",
    "num_attention_heads": 14,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
TOKENIZER_SRC = os.path.join(REPO, "build-ox", "llm_checkpoints", "qwen2_bf16")
EXPORT_FLAGS = ["--max-seqs", "8", "--max-tokens", "256", "--max-context", "512"]
FORMATS = {"bf16": [], "fp8": ["--quantize", "fp8"], "fp8-dynamic": ["--quantize", "fp8-dynamic"],
           "mxfp8": ["--quantize", "mxfp8"],
           "nvfp4": ["--quantize", "nvfp4"]}
PROMPT_TOKENS = 32
WORDS = ("the quick brown fox jumps over a lazy dog while seven small birds sing about rivers "
         "mountains clouds and the long history of ancient cities built near the sea").split()


# ---- checkpoint -------------------------------------------------------------------------------

def tensor_shapes(c):
    """[(HF name, shape)] of a Qwen2 checkpoint (with lm_head.weight when the embeddings are untied)."""
    hidden, inter, hd = c["hidden_size"], c["intermediate_size"], c["hidden_size"] // c["num_attention_heads"]
    q_out, kv_out = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    shapes = [("model.embed_tokens.weight", (c["vocab_size"], hidden))]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes += [(p + "self_attn.q_proj.weight", (q_out, hidden)), (p + "self_attn.q_proj.bias", (q_out,)),
                   (p + "self_attn.k_proj.weight", (kv_out, hidden)), (p + "self_attn.k_proj.bias", (kv_out,)),
                   (p + "self_attn.v_proj.weight", (kv_out, hidden)), (p + "self_attn.v_proj.bias", (kv_out,)),
                   (p + "self_attn.o_proj.weight", (hidden, q_out)),
                   (p + "mlp.gate_proj.weight", (inter, hidden)), (p + "mlp.up_proj.weight", (inter, hidden)),
                   (p + "mlp.down_proj.weight", (hidden, inter)),
                   (p + "input_layernorm.weight", (hidden,)), (p + "post_attention_layernorm.weight", (hidden,))]
    shapes.append(("model.norm.weight", (hidden,)))
    if not c.get("tie_word_embeddings", True):
        shapes.append(("lm_head.weight", (c["vocab_size"], hidden)))
    return shapes


def is_norm_weight(name):
    """Norm weights are written as ones, every other tensor as N(0, 0.02^2)."""
    return name.endswith("norm.weight")


def f32_to_bf16_bits(x):
    """uint16 bf16 bits of float32 `x`, round to nearest even (no NaNs here)."""
    u = x.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def write_checkpoint_metadata(ckpt_dir, config, pad_tokenizer, tokenizer_src=None):
    """config.json (bos / eos ids from the tokenizer's checkpoint), generation_config.json and the
    tokenizer files of `tokenizer_src` (default TOKENIZER_SRC; padded up to vocab_size when
    `pad_tokenizer`). Returns the config as written."""
    tokenizer_src = tokenizer_src or TOKENIZER_SRC
    os.makedirs(ckpt_dir, exist_ok=True)
    shutil.copyfile(os.path.join(tokenizer_src, "tokenizer_config.json"), os.path.join(ckpt_dir, "tokenizer_config.json"))
    with open(os.path.join(tokenizer_src, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    if pad_tokenizer:  # special added tokens <|pad_ID|> up to vocab_size - 1 (see the module doc)
        first = len(tok["model"]["vocab"]) + len(tok["added_tokens"])
        tok["added_tokens"] += [{"id": i, "content": f"<|pad_{i}|>", "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": False, "special": True}
                                for i in range(first, config["vocab_size"])]
    with open(os.path.join(ckpt_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(tokenizer_src, "generation_config.json")) as f:
        gen = json.load(f)
    with open(os.path.join(tokenizer_src, "config.json")) as f:
        src = json.load(f)
    config = dict(config, bos_token_id=src["bos_token_id"], eos_token_id=src["eos_token_id"])
    with open(os.path.join(ckpt_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    with open(os.path.join(ckpt_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2, sort_keys=True)
    return config


def write_checkpoint(ckpt_dir, config, pad_tokenizer, tokenizer_src=None):
    """write_checkpoint_metadata (tokenizer from `tokenizer_src`, default TOKENIZER_SRC), then
    model.safetensors (written by hand, streaming: 8-byte little-endian header length, JSON header,
    raw little-endian data)."""
    config = write_checkpoint_metadata(ckpt_dir, config, pad_tokenizer, tokenizer_src)
    shapes = tensor_shapes(config)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in shapes:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    chunk = 1 << 24
    with open(os.path.join(ckpt_dir, "model.safetensors"), "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        for name, shape in shapes:
            count = int(np.prod(shape))
            if is_norm_weight(name):
                f.write(f32_to_bf16_bits(np.ones(count, np.float32)).tobytes())
                continue
            rng = np.random.default_rng(np.random.SeedSequence([SEED, zlib.crc32(name.encode())]))
            for start in range(0, count, chunk):
                x = rng.standard_normal(min(chunk, count - start), dtype=np.float32)
                x *= np.float32(0.02)
                f.write(f32_to_bf16_bits(x).tobytes())
    return sum(int(np.prod(s)) for _, s in shapes)


# ---- roofline ---------------------------------------------------------------------------------

def linear_bytes(n, k, fmt):
    if fmt == "bf16":
        return n * k * 2
    if fmt in ("fp8", "fp8-dynamic"):  # per-channel weights (fp8-dynamic: FP8 activations too)
        return n * k + n * 4
    if fmt == "mxfp8":
        return n * k + n * k // 32
    if fmt == "nvfp4":
        return n * k // 2 + n * k // 16 + 4
    raise ValueError(fmt)


def weight_bytes_per_step(c, fmt):
    """Bytes of every weight a decode step streams (all linears + LM head + biases + norms)."""
    hidden, inter, hd = c["hidden_size"], c["intermediate_size"], c["hidden_size"] // c["num_attention_heads"]
    q_out, kv_out = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    per_layer = (linear_bytes(q_out, hidden, fmt) + 2 * linear_bytes(kv_out, hidden, fmt)
                 + linear_bytes(hidden, q_out, fmt) + 2 * linear_bytes(inter, hidden, fmt)
                 + linear_bytes(hidden, inter, fmt)
                 + 4 * (q_out + 2 * kv_out) + 4 * 2 * hidden)  # f32 biases and norms
    return c["num_hidden_layers"] * per_layer + linear_bytes(c["vocab_size"], hidden, fmt) + 4 * hidden


def kv_bytes_per_step(c, batch, context):
    hd = c["hidden_size"] // c["num_attention_heads"]
    return batch * context * c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * hd * 2


# ---- runs -------------------------------------------------------------------------------------

DECODE_RE = re.compile(r"prefill: (\d+) tokens in ([\d.]+) s \(([\d.]+) tok/s\); "
                       r"decode: (\d+) tokens in ([\d.]+) s \(([\d.]+) tok/s\)")


def run(cmd, log, check=True, timeout=None):
    """Runs `cmd`, writes its command line, status and output to `log`; returns (process, seconds).
    check: exit the script when it fails. timeout (s): on expiry the process gets returncode 124."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        as_text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")  # noqa: E731
        p = subprocess.CompletedProcess(cmd, 124, as_text(e.stdout),
                                        as_text(e.stderr) + f"\ntimed out after {timeout} s\n")
    dt = time.time() - t0
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + f"\n# rc {p.returncode}, {dt:.1f} s\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}")
    if p.returncode != 0 and check:
        sys.exit(f"failed (rc {p.returncode}, log {log}):\n$ {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return p, dt


def measure_bandwidth(bw_bin, threads):
    """GB/s of the 1 GiB sum with `threads` threads, best of 3 (about a second)."""
    out = subprocess.run([bw_bin, "1024", "3", str(threads), str(threads)], capture_output=True, text=True,
                         check=True).stdout
    return float(re.search(r"threads \d+: ([\d.]+) GB/s", out).group(1))


def make_prompts(runner, tokenizer, work):
    """8 distinct text prompts of exactly PROMPT_TOKENS tokens (as the runner encodes them, BOS
    included), found by growing each with words and asking `runner --tokenizer --encode`."""
    prompts = []
    for i in range(8):
        words, text = [], ""
        j = i
        while True:
            words.append(WORDS[j % len(WORDS)])
            j += 3 + i
            cand = " ".join(words)
            p, _ = run([runner, "--tokenizer", tokenizer, "--encode", cand], os.path.join(work, "logs", "encode.log"))
            n = len(p.stdout.split())
            if n > PROMPT_TOKENS:
                break
            text = cand
            if n == PROMPT_TOKENS:
                break
        p, _ = run([runner, "--tokenizer", tokenizer, "--encode", text], os.path.join(work, "logs", "encode.log"))
        n = len(p.stdout.split())
        while n < PROMPT_TOKENS:  # pad with single characters (each one byte-level token or merged)
            text += "."
            p, _ = run([runner, "--tokenizer", tokenizer, "--encode", text], os.path.join(work, "logs", "encode.log"))
            n = len(p.stdout.split())
        if n != PROMPT_TOKENS:
            sys.exit(f"cannot build a prompt of {PROMPT_TOKENS} tokens: '{text}' has {n}")
        prompts.append(text)
    return prompts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="/work/bench-llm/bin", help="folder with exporter, runner, capabilities.json")
    ap.add_argument("--work", default="/work/bench-llm", help="checkpoint, programs, logs, results.json")
    ap.add_argument("--formats", default="bf16,fp8,nvfp4")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=1, help="runs of each configuration")
    ap.add_argument("--layers", type=int, default=0, help="override num_hidden_layers (smoke tests)")
    ap.add_argument("--no-pad-tokenizer", action="store_true",
                    help="keep the 1153-id test tokenizer (the runner then fails on the first sampled id >= 1153)")
    ap.add_argument("--reuse", action="store_true", help="keep an existing checkpoint / programs")
    ap.add_argument("--cleanup", action="store_true", help="delete the checkpoint and programs at the end")
    args = ap.parse_args(argv)
    work = os.path.abspath(args.work)
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    exporter, runner = os.path.join(args.bin, "exporter"), os.path.join(args.bin, "runner")
    manifest = os.path.join(args.bin, "capabilities.json")
    config = dict(CONFIG)
    if args.layers:
        config.update(num_hidden_layers=args.layers, max_window_layers=args.layers)
    results = {"date": datetime.date.today().isoformat(), "config": config, "new_tokens": args.new_tokens,
               "prompt_tokens": PROMPT_TOKENS, "exports": {}, "runs": []}

    # 1. read bandwidth
    bw_bin = os.path.join(work, "read_bandwidth")
    subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", os.path.join(REPO, "bench", "read_bandwidth.c"),
                    "-o", bw_bin], check=True)
    threads = [int(t) for t in args.threads.split(",")]
    out = subprocess.run([bw_bin, "1024", "5", str(max(threads))], capture_output=True, text=True, check=True).stdout
    bandwidth = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"threads (\d+): ([\d.]+) GB/s", out)}
    print(out.strip(), flush=True)
    results["bandwidth_gbs"] = bandwidth

    # 2. checkpoint
    ckpt = os.path.join(work, "qwen05b" if not args.layers else f"qwen05b_l{args.layers}")
    if not (args.reuse and os.path.exists(os.path.join(ckpt, "model.safetensors"))):
        t0 = time.time()
        params = write_checkpoint(ckpt, config, not args.no_pad_tokenizer)
        print(f"checkpoint: {params / 1e6:.1f} M parameters, "
              f"{os.path.getsize(os.path.join(ckpt, 'model.safetensors')) / 1e6:.0f} MB, {time.time() - t0:.1f} s", flush=True)

    # 3. exports
    programs = {}
    for fmt in args.formats.split(","):
        pte = os.path.join(work, f"{os.path.basename(ckpt)}_{fmt}.pte")
        programs[fmt] = pte
        if args.reuse and os.path.exists(pte):
            continue
        cmd = [exporter, ckpt, "-o", pte, "--manifest", manifest] + EXPORT_FLAGS + FORMATS[fmt]
        _, dt = run(cmd, os.path.join(work, "logs", f"export_{fmt}.log"))
        results["exports"][fmt] = {"seconds": round(dt, 1), "bytes": os.path.getsize(pte)}
        print(f"export {fmt}: {dt:.1f} s, {os.path.getsize(pte) / 1e6:.1f} MB", flush=True)

    # 4. runs
    prompts = make_prompts(runner, os.path.join(ckpt, "tokenizer.json"), work)
    files = {}
    for batch in (int(b) for b in args.batches.split(",")):
        files[batch] = os.path.join(work, f"prompts_{batch}.txt")
        with open(files[batch], "w") as f:
            f.write("\n".join(prompts[:batch]) + "\n")
    context = PROMPT_TOKENS + args.new_tokens / 2
    linear_params = weight_bytes_per_step(config, "bf16") // 2  # ~ multiply-adds per token (norms: noise)
    rows = []
    for fmt, pte in programs.items():
        wbytes = weight_bytes_per_step(config, fmt)
        for batch, pfile in files.items():
            step_bytes = wbytes + kv_bytes_per_step(config, batch, context) + batch * config["hidden_size"] * 2
            for t in threads:
                for rep in range(args.repeats):
                    cmd = [runner, "--program", pte, "--prompts-file", pfile, "--max-new-tokens", str(args.new_tokens),
                           "--ignore-eos", "--threads", str(t)]
                    bw_before = measure_bandwidth(bw_bin, t)
                    load = os.getloadavg()[0]
                    p, wall = run(cmd, os.path.join(work, "logs", f"run_{fmt}_b{batch}_t{t}_r{rep}.log"))
                    bw_after = measure_bandwidth(bw_bin, t)
                    m = DECODE_RE.search(p.stderr)
                    if not m:
                        sys.exit(f"no prefill/decode line in the runner's stderr:\n{p.stderr[-2000:]}")
                    bw = (bw_before + bw_after) / 2
                    roof = bw * 1e9 * batch / step_bytes
                    row = {"format": fmt, "batch": batch, "threads": t, "repeat": rep,
                           "prefill_tokens": int(m.group(1)), "prefill_s": float(m.group(2)),
                           "prefill_tps": float(m.group(3)), "decode_tokens": int(m.group(4)),
                           "decode_s": float(m.group(5)), "decode_tps": float(m.group(6)),
                           "step_bytes": step_bytes, "bandwidth_gbs": [bw_before, bw_after],
                           "load_avg_1min": load, "roofline_tps": roof,
                           "fraction": float(m.group(6)) / roof, "wall_s": round(wall, 1)}
                    row["gflops"] = 2 * linear_params * row["decode_tps"] / 1e9
                    rows.append(row)
                    print(f"{fmt:6s} b{batch} t{t} r{rep}: decode {row['decode_tps']:.1f} tok/s "
                          f"(roofline {roof:.1f} at {bw_before:.1f}/{bw_after:.1f} GB/s, {row['fraction']:.2f}), "
                          f"prefill {row['prefill_tps']:.1f} tok/s, wall {wall:.1f} s, load {load:.1f}", flush=True)
    results["runs"] = rows
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=2)

    # 5. table
    print("\nread bandwidth at the start: " + ", ".join(f"{t} thread{'s' if t > 1 else ''} {b:.1f} GB/s" for t, b in bandwidth.items()))
    print(f"prompts {PROMPT_TOKENS} tokens, {args.new_tokens} new tokens, KV context {context:g}\n")
    print("| format | batch | threads | MB/step | read GB/s | decode tok/s | roofline tok/s | fraction | "
          "decode GFLOP/s | prefill tok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for fmt in programs:
        for batch in files:
            for t in threads:
                rs = [r for r in rows if (r["format"], r["batch"], r["threads"]) == (fmt, batch, t)]
                join = lambda key, spec: " / ".join(format(r[key], spec) for r in rs)  # noqa: E731
                bws = " / ".join(f"{sum(r['bandwidth_gbs']) / 2:.1f}" for r in rs)
                print(f"| {fmt} | {batch} | {t} | {rs[0]['step_bytes'] / 1e6:.0f} | {bws} | {join('decode_tps', '.1f')} | "
                      f"{join('roofline_tps', '.1f')} | {join('fraction', '.2f')} | {join('gflops', '.0f')} | "
                      f"{join('prefill_tps', '.1f')} |")
    if args.cleanup:
        shutil.rmtree(ckpt)
        for pte in programs.values():
            os.remove(pte)
    return 0


if __name__ == "__main__":
    sys.exit(main())
