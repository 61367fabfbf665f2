#!/usr/bin/env python3
"""Ember against llama.cpp on the CPU: batch-1 decode and 32-token prefill of a Qwen2.5-0.5B-shaped model.

Issue 16, item 5. One random-weight checkpoint (bench/llm_decode.py's: hidden 896, 24 layers,
14 / 2 heads x 64, intermediate 4864, vocab 151936, tied embeddings, q/k/v biases, bf16 weights
N(0, 0.02^2), norm weights 1) is run by both sides in three pairs of formats of about the same
bytes per weight:

  Ember bf16  (2 B / weight)                      vs llama.cpp F16  (2 B / weight)
  Ember FP8   (e4m3 per channel, ~1 B / weight)   vs llama.cpp Q8_0 (8.5 bits / weight)
  Ember NVFP4 (e2m1 + ue4m3 per 16, 4.5 bits)     vs llama.cpp Q4_0 (4.5 bits / weight), pure

Ember: the checkpoint is exported with `exporter CKPT --max-seqs 8 --max-tokens 256 --max-context
512 [--quantize fp8|nvfp4]` (llm_decode.py's flags; the quantized programs quantize the LM head
with the other linears and keep the embedding table bf16) and run as `runner --program X.pte
--prompts-file P --max-new-tokens N --warmup --ignore-eos --temperature 0 --repetition-penalty 1 --threads T
[--cpu-target AVX2]`, P holding one prompt of exactly 32 tokens as the runner encodes it. Its
"prefill: ...; decode: ..." line gives prefill tok/s (the 32-token step, the first token
included) and decode tok/s (the N - 1 single-token steps that follow). One process per round:
program load is not timed, and --warmup runs an untimed 2-token generation first (llama-bench
warms up too).

llama.cpp: commit 0c1e57098 as the PyPI sdist of llama-cpp-python 0.3.36 vendors it, built CPU
only by bench/llama_cpp/build.sh (`native`: -march=native; `avx2`: GGML_NATIVE=OFF with AVX2, FMA,
F16C, BMI2 and no AVX-512). The GGUF files come from the same checkpoint, but not through
convert_hf_to_gguf.py: it needs transformers and torch, and refuses this checkpoint's test
tokenizer (1153 ids; its pre-tokenizer hash is in no list). This script writes the F16 GGUF itself
with the sdist's gguf-py, mapping the tensor names as the converter does for Qwen2ForCausalLM
(gguf-py's Qwen2 name map; no output.weight, so llama.cpp ties the LM head to token_embd; norms
and biases f32, matrices f16; the vocabulary is the test tokenizer's ids plus [PADi] up to 151936,
model "gpt2", pre-tokenizer "qwen2"), reads the file back and checks every tensor against the
checkpoint (bf16 -> f16 is exact except for values below f16's normal range, 6.1e-5: about
0.02 % of these weights move by at most 3e-8; the count and the largest difference are reported),
then makes Q8_0 and Q4_0 with `llama-quantize --pure` (every matrix, token_embd / LM head
included, in the one type; llama.cpp repacks Q4_0 for its AVX2 / AVX-512 kernels at load, its
default). Each round runs
`llama-bench -m X.gguf -p 32 -n N -t T -r 1 -o json` (its default warm-up run included, not timed):
pp32 and tgN tok/s. Its tg test decodes from an empty cache, Ember's after the 32-token prompt
(24 layers x 2 x 128 x 2 B per cached token: 0.4 MB per step at context 32, against 0.3-1 GB of
weights).

Per SIMD column (native, avx2), thread count and pair, the rounds alternate the two runtimes (the
order flips each round); the report gives the median over rounds of each side's tok/s and the
ratios Ember / llama.cpp (> 1: Ember faster), as a markdown table (llm_vs_llama_cpp.md) and JSON
(llm_vs_llama_cpp.json, every round's figures) in --out. The table's "weights MB/step" is what one
decode step streams on each side (every matrix once, the LM head in the pair's format; llama.cpp's
equals llama-bench's model_size); Ember's quantized program files are larger, as they also hold
the bf16 embedding table for the row gather. Nothing is asserted: this is a benchmark.

Usage (from the repository root):
  bench/llama_cpp/build.sh native avx2            # once: the sdist, its commit check, two builds
  cmake --build build/release -j2 --target runner exporter
  .venv/bin/python bench/llm_vs_llama_cpp.py --rounds 2 --new-tokens 32
  .venv/bin/python bench/llm_vs_llama_cpp.py --simd native --threads 1 --pairs nvfp4:q4_0 --reuse
  .venv/bin/python bench/llm_vs_llama_cpp.py --layers 2 --rounds 1    # smoke test, 2 layers
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llm_decode as ld  # noqa: E402  (checkpoint, export flags, prompts, runner's line, run())
from cpu_models import cpu_line  # noqa: E402

REPO = ld.REPO
PAIRS = {"fp8": "q8_0", "nvfp4": "q4_0", "bf16": "f16"}  # Ember format -> llama.cpp type
SIMD = {"native": None, "avx2": "AVX2"}  # column -> runner --cpu-target (None: the best the CPU has)
TOKENIZER_CANDIDATES = ("build/release/llm_checkpoints", "build/gpu/llm_checkpoints", "build-ox/llm_checkpoints")
RUNNER_ARGS = ["--ignore-eos", "--temperature", "0", "--repetition-penalty", "1"]


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def ember_tool(bin_dir, name):
    for rel in (name, os.path.join("tools", "runner", name), os.path.join("exporter", name)):
        p = os.path.join(bin_dir, rel)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    sys.exit(f"llm_vs_llama_cpp.py: no {name} in {bin_dir} (cmake --build build/release --target {name}, or --bin)")


def llama_tool(llama_dir, simd, name):
    p = os.path.join(llama_dir, f"bin-{simd}", name)
    if not (os.path.isfile(p) and os.access(p, os.X_OK)):
        sys.exit(f"llm_vs_llama_cpp.py: no {p} (bench/llama_cpp/build.sh {simd}, or --llama-dir)")
    return p


def tokenizer_src(args):
    """The qwen2_bf16 test checkpoint whose tokenizer the benchmark checkpoint takes."""
    bases = [args.tokenizer_src] if args.tokenizer_src else (
        [os.environ["EMBER_LLM_CHECKPOINTS"]] if os.environ.get("EMBER_LLM_CHECKPOINTS") else []) + \
        [os.path.join(REPO, b) for b in TOKENIZER_CANDIDATES]
    for base in bases:
        for d in (base, os.path.join(base, "qwen2_bf16")):
            if os.path.isfile(os.path.join(d, "tokenizer.json")):
                return d
    sys.exit("llm_vs_llama_cpp.py: no qwen2_bf16 tokenizer (tried " + ", ".join(bases) + "); ctest -R "
             "ember_llm_checkpoints makes build/release/llm_checkpoints, or pass --tokenizer-src")


def ember_cpu_targets(runner):
    """Highway targets this runner can run here, best first, from its --cpu-target error message
    ("... not one this build and CPU can run (AVX3_ZEN4, AVX3, AVX2, ...)")."""
    p = subprocess.run([runner, "--cpu-target", "?"], capture_output=True, text=True)
    m = re.search(r"can run \(([^)]*)\)", p.stderr)
    if p.returncode == 0 or not m:
        sys.exit(f"llm_vs_llama_cpp.py: cannot read the runner's cpu targets (rc {p.returncode}): {p.stderr.strip()[-300:]}")
    return [t.strip() for t in m.group(1).split(",")]


def weight_bytes_per_step(config, side, fmt):
    """Weight bytes one decode step streams: every matrix once (the tied LM head included; the
    embedding row gather is left out) plus the f32 norms and biases. Ember: llm_decode.py's count;
    llama.cpp: Q8_0 = 34 B and Q4_0 = 18 B per 32 weights, F16 2 B per weight."""
    if side == "ember":
        return ld.weight_bytes_per_step(config, fmt)
    shapes = ld.tensor_shapes(config)
    matrices = sum(int(np.prod(s)) for _, s in shapes if len(s) == 2)
    vectors = sum(int(np.prod(s)) for _, s in shapes if len(s) == 1)
    return int(matrices * {"f16": 2, "q8_0": 34 / 32, "q4_0": 18 / 32}[fmt]) + 4 * vectors


def llama_simd_flags(llama_dir, simd):
    """How build.sh compiled ggml-cpu for this column (its cmake line), e.g. '-march=native'."""
    try:
        with open(os.path.join(llama_dir, f"build-{simd}.log")) as f:
            m = re.search(r"Adding CPU backend variant ggml-cpu: *(.*)", f.read())
        return m.group(1).split()[0].replace(";", " ") if m else "?"  # "-march=native", "-msse4.2 ... -mavx2"
    except OSError:
        return "?"


# ---- GGUF --------------------------------------------------------------------------------------

def read_safetensors_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n)), 8 + n


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def checkpoint_tensors(ckpt):
    """(name, bf16 bits as a uint16 memmap in the checkpoint's shape), in file order."""
    path = os.path.join(ckpt, "model.safetensors")
    header, base = read_safetensors_header(path)
    out = []
    for name, info in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                             key=lambda kv: kv[1]["data_offsets"][0]):
        if info["dtype"] != "BF16":
            sys.exit(f"{path}: {name} is {info['dtype']}, expected BF16")
        begin, end = info["data_offsets"]
        out.append((name, np.memmap(path, np.uint16, "r", base + begin, tuple(info["shape"]))))
        assert out[-1][1].nbytes == end - begin
    return out


def gguf_tensor(bits):
    """What the converter stores for this tensor with --outtype f16: matrices f16, 1-D f32."""
    x = bf16_to_f32(np.asarray(bits))
    return x.astype(np.float16) if x.ndim > 1 else x


def write_gguf_f16(gguf, ckpt, config, path):
    """The checkpoint as an F16 GGUF (see the module doc), streamed tensor by tensor."""
    with open(os.path.join(ckpt, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    n_vocab = config["vocab_size"]
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    types = [gguf.TokenType.UNUSED] * n_vocab
    for text, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for t in tok["added_tokens"]:
        tokens[t["id"]] = t["content"]
        types[t["id"]] = gguf.TokenType.CONTROL if t["special"] else gguf.TokenType.USER_DEFINED
    arch = gguf.MODEL_ARCH.QWEN2
    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[arch])
    w.add_name("Ember bench Qwen2.5-0.5B-shaped random weights")
    w.add_block_count(config["num_hidden_layers"])
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(config["num_attention_heads"])
    w.add_head_count_kv(config["num_key_value_heads"])
    w.add_rope_freq_base(config["rope_theta"])
    w.add_layer_norm_rms_eps(config["rms_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    gguf.SpecialVocab(ckpt, load_merges=True, n_vocab=n_vocab).add_to_gguf(w, quiet=True)
    names = gguf.get_tensor_name_map(arch, config["num_hidden_layers"])
    tensors = []
    for name, bits in checkpoint_tensors(ckpt):
        gname = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gname is None:
            sys.exit(f"write_gguf_f16: no GGUF name for {name}")
        dtype = np.dtype(np.float16 if bits.ndim > 1 else np.float32)
        w.add_tensor_info(gname, bits.shape, dtype, int(np.prod(bits.shape)) * dtype.itemsize)
        tensors.append((name, gname, bits))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, _, bits in tensors:
        w.write_tensor_data(gguf_tensor(bits))
    w.close()
    return [(name, gname) for name, gname, _ in tensors]


def check_gguf_f16(gguf, ckpt, path, names):
    """Reads the GGUF back: every tensor equal to gguf_tensor() of the checkpoint's. Returns how many
    values f16 does not hold exactly (bf16 values below f16's normal range, 6.1e-5, rounded to f16
    subnormals) and the largest such difference."""
    reader = gguf.GGUFReader(path)
    by_name = {t.name: t for t in reader.tensors}
    inexact, max_err = 0, 0.0
    for (name, bits), (_, gname) in zip(checkpoint_tensors(ckpt), names):
        t = by_name.get(gname)
        if t is None:
            sys.exit(f"{path}: tensor {gname} ({name}) missing")
        got = np.asarray(t.data).reshape(bits.shape)
        want = gguf_tensor(bits)
        if got.dtype != want.dtype or not np.array_equal(got, want):
            sys.exit(f"{path}: tensor {gname} differs from {name} in the checkpoint")
        err = np.abs(want.astype(np.float32) - bf16_to_f32(np.asarray(bits)))
        inexact += int(np.count_nonzero(err))
        max_err = max(max_err, float(err.max()))
    return inexact, max_err


# ---- runs -------------------------------------------------------------------------------------

def run_ember(args, runner, pte, prompts, threads, cpu_target, log):
    cmd = [runner, "--program", pte, "--prompts-file", prompts, "--max-new-tokens", str(args.new_tokens),
           "--threads", str(threads), "--warmup"] + RUNNER_ARGS + (["--cpu-target", cpu_target] if cpu_target else [])
    p, wall = ld.run(cmd, log, check=False, timeout=args.run_timeout)
    m = ld.DECODE_RE.search(p.stderr)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"runner failed (rc {p.returncode}, log {log}): {p.stderr.strip()[-300:]}")
    r = {"prefill_tokens": int(m.group(1)), "prefill_tps": float(m.group(3)), "decode_tokens": int(m.group(4)),
         "decode_tps": float(m.group(6)), "wall_s": round(wall, 2)}
    if r["prefill_tokens"] != ld.PROMPT_TOKENS or r["decode_tokens"] != args.new_tokens - 1:
        raise RuntimeError(f"runner: prefill {r['prefill_tokens']} / decode {r['decode_tokens']} tokens, expected "
                           f"{ld.PROMPT_TOKENS} / {args.new_tokens - 1} (log {log})")
    return r


def run_llama(args, bench, gguf_path, threads, log):
    cmd = [bench, "-m", gguf_path, "-p", str(ld.PROMPT_TOKENS), "-n", str(args.new_tokens), "-t", str(threads),
           "-r", "1", "-o", "json"]
    p, wall = ld.run(cmd, log, check=False, timeout=args.run_timeout)
    try:
        tests = json.loads(p.stdout)
    except ValueError:
        tests = None
    if p.returncode != 0 or not tests:
        raise RuntimeError(f"llama-bench failed (rc {p.returncode}, log {log}): {p.stderr.strip()[-300:]}")
    pp = [t for t in tests if t["n_prompt"] == ld.PROMPT_TOKENS and t["n_gen"] == 0]
    tg = [t for t in tests if t["n_gen"] == args.new_tokens and t["n_prompt"] == 0]
    if len(pp) != 1 or len(tg) != 1:
        raise RuntimeError(f"llama-bench: no pp{ld.PROMPT_TOKENS} / tg{args.new_tokens} result (log {log})")
    return {"prefill_tps": pp[0]["avg_ts"], "decode_tps": tg[0]["avg_ts"], "wall_s": round(wall, 2),
            "info": {k: tg[0].get(k) for k in ("build_commit", "cpu_info", "backends", "model_type", "model_size",
                                                "n_threads", "type_k", "type_v", "flash_attn", "n_batch",
                                                "n_ubatch", "repack", "load_mode")}}


def prepare(args, work, config, runner, exporter):
    """Checkpoint, Ember programs, GGUF files, the prompt file; returns (programs, ggufs, prompt file, notes)."""
    notes = {"exports": {}, "gguf": {}}
    ckpt = os.path.join(work, "qwen05b" if not args.layers else f"qwen05b_l{args.layers}")
    if not (args.reuse and os.path.isfile(os.path.join(ckpt, "model.safetensors"))):
        t0 = time.time()
        params = ld.write_checkpoint(ckpt, config, False, tokenizer_src(args))
        print(f"checkpoint: {params / 1e6:.1f} M parameters in {time.time() - t0:.1f} s", flush=True)
    fmts = list(dict.fromkeys(f for f, _ in args.pairs))
    programs = {}
    for fmt in fmts:
        pte = programs[fmt] = os.path.join(work, f"{os.path.basename(ckpt)}_{fmt}.pte")
        if args.reuse and os.path.isfile(pte):
            continue
        cmd = [exporter, ckpt, "-o", pte] + ld.EXPORT_FLAGS + ld.FORMATS[fmt]
        _, dt = ld.run(cmd, os.path.join(work, "logs", f"export_{fmt}.log"))
        notes["exports"][fmt] = {"seconds": round(dt, 1), "bytes": os.path.getsize(pte)}
        print(f"export {fmt}: {dt:.1f} s, {os.path.getsize(pte) / 1e6:.1f} MB", flush=True)
    ggufs = {"f16": os.path.join(work, f"{os.path.basename(ckpt)}_f16.gguf")}
    if not (args.reuse and os.path.isfile(ggufs["f16"])):
        sys.path.insert(0, os.path.join(args.llama_dir, "src", "gguf-py"))
        import gguf
        t0 = time.time()
        names = write_gguf_f16(gguf, ckpt, config, ggufs["f16"])
        t1 = time.time()
        inexact, max_err = check_gguf_f16(gguf, ckpt, ggufs["f16"], names)
        notes["gguf"]["f16"] = {"seconds": round(t1 - t0, 1), "check_s": round(time.time() - t1, 1),
                                "bytes": os.path.getsize(ggufs["f16"]), "values_not_exact_in_f16": inexact,
                                "max_abs_error": max_err}
        print(f"gguf f16: {t1 - t0:.1f} s, {os.path.getsize(ggufs['f16']) / 1e6:.1f} MB; read back in "
              f"{time.time() - t1:.1f} s: every tensor as written; {inexact} values not exact in f16 "
              f"(largest difference {max_err:.1e})", flush=True)
    quantize = llama_tool(args.llama_dir, args.simd[0], "llama-quantize")
    for qtype in dict.fromkeys(q for _, q in args.pairs):
        if qtype == "f16":
            continue
        ggufs[qtype] = os.path.join(work, f"{os.path.basename(ckpt)}_{qtype}.gguf")
        if args.reuse and os.path.isfile(ggufs[qtype]):
            continue
        cmd = [quantize, "--pure", ggufs["f16"], ggufs[qtype], qtype.upper()]
        _, dt = ld.run(cmd, os.path.join(work, "logs", f"quantize_{qtype}.log"))
        notes["gguf"][qtype] = {"seconds": round(dt, 1), "bytes": os.path.getsize(ggufs[qtype])}
        print(f"llama-quantize --pure {qtype.upper()}: {dt:.1f} s, {os.path.getsize(ggufs[qtype]) / 1e6:.1f} MB",
              flush=True)
    prompt = ld.make_prompts(runner, os.path.join(ckpt, "tokenizer.json"), work)[0]
    prompts = os.path.join(work, "prompt_1.txt")
    with open(prompts, "w") as f:
        f.write(prompt + "\n")
    return programs, ggufs, prompts, notes


def parse_pairs(text):
    pairs = []
    for item in text.split(","):
        fmt, _, qtype = item.partition(":")
        qtype = (qtype or PAIRS.get(fmt, "")).lower()
        if fmt not in ld.FORMATS or qtype not in ("f16", "q8_0", "q4_0"):
            raise argparse.ArgumentTypeError(f"pair '{item}': Ember format one of {', '.join(ld.FORMATS)}, "
                                             "llama.cpp type one of f16, q8_0, q4_0 (e.g. fp8:q8_0)")
        pairs.append((fmt, qtype))
    return pairs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "release"),
                    help="Ember runner and exporter: a build tree or a flat folder (default: build/release)")
    ap.add_argument("--llama-dir", default=os.path.join(REPO, "build", "llama_cpp"),
                    help="bench/llama_cpp/build.sh's folder: bin-<simd>/, build-<simd>.log, src/gguf-py "
                         "(default: build/llama_cpp)")
    ap.add_argument("--work", default="/tmp/ember_llama_bench", help="checkpoint, programs, GGUF files, logs")
    ap.add_argument("--out", default=None, help="llm_vs_llama_cpp.md / .json go here (default: --work)")
    ap.add_argument("--pairs", type=parse_pairs, default=parse_pairs("fp8:q8_0,nvfp4:q4_0,bf16:f16"),
                    help="Ember format:llama.cpp type, comma-separated (default fp8:q8_0,nvfp4:q4_0,bf16:f16)")
    ap.add_argument("--simd", default="native,avx2",
                    help="SIMD columns: native (Ember's best target, llama.cpp -march=native) and avx2 (runner "
                         "--cpu-target AVX2, llama.cpp's AVX2 build); the first column's llama-quantize makes the "
                         "GGUFs (default native,avx2)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--rounds", type=int, default=3, help="alternations per configuration (default 3)")
    ap.add_argument("--new-tokens", type=int, default=32,
                    help="N: runner --max-new-tokens N and llama-bench -n N (default 32)")
    ap.add_argument("--layers", type=int, default=0, help="override num_hidden_layers (smoke tests)")
    ap.add_argument("--tokenizer-src", default="",
                    help="folder with the qwen2_bf16 test checkpoint (default: $EMBER_LLM_CHECKPOINTS, then "
                         + ", ".join(TOKENIZER_CANDIDATES) + ")")
    ap.add_argument("--reuse", action="store_true", help="keep an existing checkpoint, programs and GGUF files")
    ap.add_argument("--run-timeout", type=int, default=600, help="seconds per runner / llama-bench call")
    args = ap.parse_args(argv)
    args.simd = args.simd.split(",")
    for s in args.simd:
        if s not in SIMD:
            ap.error(f"--simd: unknown column '{s}' (native, avx2)")
    if args.new_tokens < 2 or args.rounds < 1:
        ap.error("--new-tokens must be >= 2 (the runner's decode steps are N - 1) and --rounds >= 1")
    threads = [int(t) for t in args.threads.split(",")]
    work = os.path.abspath(args.work)
    out = os.path.abspath(args.out or work)
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    os.makedirs(out, exist_ok=True)
    runner, exporter = ember_tool(args.bin, "runner"), ember_tool(args.bin, "exporter")
    benches = {s: llama_tool(args.llama_dir, s, "llama-bench") for s in args.simd}
    config = dict(ld.CONFIG)
    if args.layers:
        config.update(num_hidden_layers=args.layers, max_window_layers=args.layers)

    targets = ember_cpu_targets(runner)
    simd_info = {s: {"ember": SIMD[s] or targets[0], "llama_cpp": llama_simd_flags(args.llama_dir, s)}
                 for s in args.simd}
    for s, info in simd_info.items():
        if info["ember"] not in targets:
            sys.exit(f"llm_vs_llama_cpp.py: --simd {s}: the runner cannot run {info['ember']} here ({', '.join(targets)})")
    machine = cpu_line()
    print(f"machine: {machine}; " + "; ".join(f"{s}: Ember {i['ember']}, llama.cpp {i['llama_cpp']}"
                                              for s, i in simd_info.items()), flush=True)

    programs, ggufs, prompts, notes = prepare(args, work, config, runner, exporter)
    started = utc_now()
    records, llama_info = [], {}
    for simd in args.simd:
        for t in threads:
            for fmt, qtype in args.pairs:
                rec = {"simd": simd, "threads": t, "ember_format": fmt, "llama_type": qtype.upper(),
                       "ember": [], "llama_cpp": [], "error": None}
                tag = f"{simd}_t{t}_{fmt}_{qtype}"
                try:
                    for r in range(args.rounds):
                        order = ("ember", "llama_cpp") if r % 2 == 0 else ("llama_cpp", "ember")
                        for side in order:
                            log = os.path.join(work, "logs", f"{side}_{tag}_r{r}.log")
                            if side == "ember":
                                rec["ember"].append(run_ember(args, runner, programs[fmt], prompts, t,
                                                              SIMD[simd], log))
                            else:
                                res = run_llama(args, benches[simd], ggufs[qtype], t, log)
                                llama_info[f"{simd}/{qtype}"] = res.pop("info")
                                rec["llama_cpp"].append(res)
                except RuntimeError as e:
                    rec["error"] = str(e)
                    print(f"{tag}: {e}", flush=True)
                for side in ("ember", "llama_cpp"):
                    for key in ("decode_tps", "prefill_tps"):
                        vals = [x[key] for x in rec[side]]
                        rec[f"{side}_{key}"] = statistics.median(vals) if vals else None
                records.append(rec)
                if not rec["error"]:
                    print(f"{tag}: decode Ember {rec['ember_decode_tps']:.1f} / llama.cpp "
                          f"{rec['llama_cpp_decode_tps']:.1f} tok/s, prefill {rec['ember_prefill_tps']:.1f} / "
                          f"{rec['llama_cpp_prefill_tps']:.1f} tok/s (rounds: "
                          + ", ".join(f"{e['decode_tps']:.1f}/{l['decode_tps']:.1f}"
                                      for e, l in zip(rec["ember"], rec["llama_cpp"])) + ")", flush=True)
    finished = utc_now()

    sizes = {fmt: os.path.getsize(p) for fmt, p in programs.items()}
    sizes.update({q: os.path.getsize(p) for q, p in ggufs.items()})
    step_bytes = {"ember": {f: weight_bytes_per_step(config, "ember", f) for f, _ in args.pairs},
                  "llama_cpp": {q: weight_bytes_per_step(config, "llama_cpp", q) for _, q in args.pairs}}
    commit = next((i.get("build_commit") for i in llama_info.values() if i), "?")
    lines = [f"Ember vs llama.cpp (commit {commit}), CPU, batch 1, Qwen2.5-0.5B-shaped random weights "
             f"({config['num_hidden_layers']} layers); {started} - {finished} UTC",
             f"machine: {machine}; load average at the end {os.getloadavg()[0]:.1f}",
             "SIMD: " + "; ".join(f"{s}: Ember cpu kernels {i['ember']}, llama.cpp ggml-cpu {i['llama_cpp']}"
                                  for s, i in simd_info.items()),
             f"prompt {ld.PROMPT_TOKENS} tokens, {args.new_tokens} new tokens (Ember decode: {args.new_tokens - 1} "
             f"steps after the prompt; llama-bench tg{args.new_tokens}: from an empty cache); "
             f"{args.rounds} alternating rounds, medians; ratio = Ember / llama.cpp tok/s (> 1: Ember faster)",
             "", "| Ember vs llama.cpp | SIMD | threads | decode tok/s Ember | decode tok/s llama.cpp | decode ratio | "
             "prefill tok/s Ember | prefill tok/s llama.cpp | prefill ratio | weights MB/step Ember / llama.cpp |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for rec in records:
        fmt, qtype = rec["ember_format"], rec["llama_type"].lower()
        head = f"| {fmt} vs {rec['llama_type']} | {rec['simd']} | {rec['threads']} |"
        if rec["error"]:
            lines.append(f"{head} {rec['error']} | | | | | | |")
            continue
        ratio = lambda key: rec[f"ember_{key}"] / rec[f"llama_cpp_{key}"]  # noqa: E731
        lines.append(f"{head} {rec['ember_decode_tps']:.1f} | {rec['llama_cpp_decode_tps']:.1f} | "
                     f"{ratio('decode_tps'):.2f} | {rec['ember_prefill_tps']:.1f} | {rec['llama_cpp_prefill_tps']:.1f} | "
                     f"{ratio('prefill_tps'):.2f} | {step_bytes['ember'][fmt] / 1e6:.0f} / "
                     f"{step_bytes['llama_cpp'][qtype] / 1e6:.0f} |")
    report = "\n".join(lines) + "\n"
    with open(os.path.join(out, "llm_vs_llama_cpp.md"), "w") as f:
        f.write(report)
    with open(os.path.join(out, "llm_vs_llama_cpp.json"), "w") as f:
        json.dump({"started_utc": started, "finished_utc": finished, "machine": machine, "simd": simd_info,
                   "ember_cpu_targets": targets, "llama_cpp": llama_info, "config": config,
                   "prompt_tokens": ld.PROMPT_TOKENS, "new_tokens": args.new_tokens, "rounds": args.rounds,
                   "file_bytes": sizes, "weight_bytes_per_step": step_bytes, "prepare": notes, "records": records}, f, indent=1)
    print("\n" + report)
    return 1 if any(r["error"] for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
