#!/usr/bin/env python3
"""GPU decode benchmark: Ember's CUDA backend against HF transformers and the HBM roofline.

    bench/cuda/run.sh [stage ...]                  (on the GPU machine; no stage = all, in order)
    bench/cuda/run.sh --tiny                       (here, on the CPU: a tiny model, portable backend)

A Qwen2.5-7B-shaped Qwen2ForCausalLM checkpoint (hidden 3584, 28 layers, 28 / 4 heads x 128,
intermediate 18944, vocab 152064, untied LM head, q/k/v biases) with random bf16 weights N(0, 0.02^2)
(norm weights 1) is exported as bf16 and with `--quantize fp8`; 16-token prompts decode 64 tokens at
batch 1, 8, 32, 128 and 512. Stages (each one skips work whose result already exists under WORK, so a
run cut short by the 10-minute device limit resumes where it stopped):

  checkpoint  the checkpoint, written with torch on the GPU and safetensors, sharded (<= 4 GiB
              each, model.safetensors.index.json), timed; the tokenizer is the 1153-id test tokenizer
              (not padded: the runner skips sampled ids without a token);
  export      exporter CKPT --max-seqs 512 --max-tokens 8192 --max-context 128 --backends cuda (bf16,
              then --quantize fp8), each timed; --max-tokens is max batch x prompt tokens, so a batch's
              whole prefill is one step and every later step is a pure decode step. --backends cuda
              needs the capability manifest: BIN/capabilities.json or BIN/../capabilities.json
              (build/gpu/capabilities.json), or --manifest;
  ember       runner --info X.pte --backends cuda first: the runs count only when a listed backend
              (not the portable kernels) runs the step; then
              runner --program X.pte --backends cuda --prompts-file P --max-new-tokens 64
              --ignore-eos --temperature 0 --repetition-penalty 1, for each dtype and batch; the
              runner's "decode: N tokens in S s (R tok/s)" line is the figure (N = tokens fed back,
              batch x 63; S = the time of the pure decode steps). A failed run is recorded with its
              error line and the next one goes on;
  hf          transformers generate (bf16, eager PyTorch: no torch.compile, default attention and
              cache), the same prompt ids, do_sample=False, min/max_new_tokens=64; the model is loaded
              once. Decode tok/s = batch x 63 / (t(64 new tokens) - t(1 new token)); end-to-end tok/s
              = batch x 64 / t(64);
  roofline    a torch device-to-device copy of 4 GiB, (bytes read + written) / time, best of 5;
              roofline tok/s at batch 1 = bandwidth / bytes per decode step, counted as
              llm_decode.py counts them (every linear weight in its stored format incl. the LM head,
              f32 biases and norms, the gathered embedding row, the KV read at context 16 + 64/2);
  report      a markdown table to OUT/bench_cuda.md and stdout, OUT/bench_cuda.json, the logs in
              OUT/bench_cuda_logs/.

Every figure in the report is read from this WORK folder's result files, each a measurement with its
UTC time (the report gives the span). Nothing is hard-coded.

Exit status: 0 when the requested stages ran (failed measurements are in the table), 1 when a stage
itself broke (a Python exception), 3 with --strict when any measurement failed.
"""

import argparse
import datetime
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llm_decode as ld  # noqa: E402  (checkpoint metadata, tensor list, byte counts, runner parsing)

REPO = ld.REPO
STAGES = ("checkpoint", "export", "ember", "hf", "roofline", "report")
SEED = 20261126

QWEN25_7B = dict(ld.CONFIG, hidden_size=3584, intermediate_size=18944, num_attention_heads=28,
                 num_key_value_heads=4, num_hidden_layers=28, max_window_layers=28, vocab_size=152064,
                 tie_word_embeddings=False)
TINY = dict(ld.CONFIG, hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
            num_hidden_layers=2, max_window_layers=2, vocab_size=4096, tie_word_embeddings=False)
TOKENIZER_CANDIDATES = ("{env}", "build/gpu/llm_checkpoints", "build/release/llm_checkpoints", "build-ox/llm_checkpoints")


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


class Bench:
    def __init__(self, args):
        self.args = args
        self.config = dict(TINY if args.tiny else QWEN25_7B)
        self.work = os.path.abspath(args.work)
        self.results = os.path.join(self.work, "results")
        self.logs = os.path.join(self.work, "logs")
        self.ckpt = os.path.join(self.work, "checkpoint")
        for d in (self.results, self.logs):
            os.makedirs(d, exist_ok=True)
        self.out = os.path.abspath(args.out)
        self.batches = [int(b) for b in args.batches.split(",")]
        self.dtypes = args.dtypes.split(",")
        self.start = time.time()
        self.max_tokens = args.max_tokens or max(self.batches) * args.prompt_tokens
        self.failures = []  # (what, error line) of this invocation

    # ---- bookkeeping --------------------------------------------------------------------------

    def result_path(self, name):
        return os.path.join(self.results, name + ".json")

    def load(self, name):
        try:
            with open(self.result_path(name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def ok(self, name):
        r = self.load(name)
        return bool(r is not None and r.get("ok"))

    def done(self, name):
        """Work this stage skips: a result present and ok (failed ones are tried again), unless --force."""
        return self.ok(name) and not self.args.force

    def save(self, name, record):
        record.setdefault("measured_at", utc_now())
        tmp = self.result_path(name) + ".tmp"
        with open(tmp, "w") as f:
            json.dump(record, f, indent=2)
        os.replace(tmp, self.result_path(name))
        if not record.get("ok"):
            self.failures.append((name, record.get("error", "?")))

    def over_budget(self, what):
        """True (and a note) when --budget-s seconds have passed: the item is left for a later call."""
        if self.args.budget_s and time.time() - self.start > self.args.budget_s:
            print(f"{what}: skipped, the time budget of {self.args.budget_s} s is spent (run the stage again)", flush=True)
            return True
        return False

    def tool(self, name):
        for p in (os.path.join(self.args.bin, name), os.path.join(self.args.bin, "tools", "runner", name),
                  os.path.join(self.args.bin, "exporter", name)):
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
        return None

    def torch_device(self):
        return self.args.device or ("cpu" if self.args.tiny else "cuda")

    # ---- checkpoint ---------------------------------------------------------------------------

    def tokenizer_src(self):
        if self.args.tokenizer_src:
            return self.args.tokenizer_src
        for base in TOKENIZER_CANDIDATES:
            base = os.environ.get("EMBER_LLM_CHECKPOINTS", "") if base == "{env}" else os.path.join(REPO, base)
            if base and os.path.isfile(os.path.join(base, "qwen2_bf16", "tokenizer.json")):
                return os.path.join(base, "qwen2_bf16")
        raise RuntimeError("no qwen2_bf16 test checkpoint for the tokenizer (tried $EMBER_LLM_CHECKPOINTS and "
                           f"{', '.join(TOKENIZER_CANDIDATES[1:])}); pass --tokenizer-src")

    def stage_checkpoint(self):
        if self.done("checkpoint") and os.path.isfile(os.path.join(self.ckpt, "model.safetensors.index.json")):
            r = self.load("checkpoint")
            print(f"checkpoint: exists ({r['bytes'] / 1e9:.2f} GB, written in {r['seconds']:.1f} s at {r['measured_at']})")
            return
        if self.over_budget("checkpoint"):
            return
        import torch
        import safetensors.torch
        device = torch.device(self.torch_device())
        t0 = time.time()
        if os.path.isdir(self.ckpt):
            shutil.rmtree(self.ckpt)
        config = ld.write_checkpoint_metadata(self.ckpt, self.config, pad_tokenizer=False,
                                              tokenizer_src=self.tokenizer_src())
        # Greedy by default (the test checkpoint's generation_config.json samples at temperature 0.7
        # with a repetition penalty); the runner is also given --temperature 0 --repetition-penalty 1.
        eos = config["eos_token_id"]
        with open(os.path.join(self.ckpt, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": eos, "pad_token_id": eos,
                       "do_sample": False}, f, indent=2)
        shapes = ld.tensor_shapes(config)
        shard_limit = int(self.args.shard_gib * (1 << 30))
        shards, size = [[]], 0
        for name, shape in shapes:
            n = 2 * int(torch.Size(shape).numel())
            if shards[-1] and size + n > shard_limit:
                shards.append([])
                size = 0
            shards[-1].append((name, shape))
            size += n
        weight_map, total, gen_s, save_s = {}, 0, 0.0, 0.0
        for i, shard in enumerate(shards):
            fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            tensors = {}
            tg = time.time()
            for name, shape in shard:
                if ld.is_norm_weight(name):
                    t = torch.ones(shape, dtype=torch.bfloat16, device=device)
                else:
                    g = torch.Generator(device=device)
                    g.manual_seed(SEED * 2**32 + zlib.crc32(name.encode()))
                    t = torch.randn(shape, generator=g, device=device, dtype=torch.float32).mul_(0.02).to(torch.bfloat16)
                tensors[name] = t.cpu()
                weight_map[name] = fname
                total += t.numel() * 2
            gen_s += time.time() - tg
            ts = time.time()
            safetensors.torch.save_file(tensors, os.path.join(self.ckpt, fname), metadata={"format": "pt"})
            save_s += time.time() - ts
            del tensors
        with open(os.path.join(self.ckpt, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        dt = time.time() - t0
        params = total // 2
        self.save("checkpoint", {"ok": True, "seconds": round(dt, 2), "generate_s": round(gen_s, 2),
                                 "save_s": round(save_s, 2), "bytes": total, "parameters": params,
                                 "shards": len(shards), "device": str(device), "config": config})
        print(f"checkpoint: {params / 1e9:.3f} B parameters, {total / 1e9:.2f} GB in {len(shards)} shards, "
              f"{dt:.1f} s (generate + copy to host {gen_s:.1f} s, safetensors {save_s:.1f} s) on {device}", flush=True)

    # ---- export -------------------------------------------------------------------------------

    def pte(self, fmt):
        return os.path.join(self.work, f"model_{fmt}.pte")

    def export_flags(self):
        flags = ["--max-seqs", str(max(self.batches)), "--max-tokens", str(self.max_tokens),
                 "--max-context", str(self.args.max_context)]
        if self.args.export_backends:
            flags += ["--backends", self.args.export_backends]
        return flags

    def manifest(self):
        if self.args.manifest:
            return self.args.manifest
        for p in (os.path.join(self.args.bin, "capabilities.json"), os.path.join(self.args.bin, "..", "capabilities.json")):
            if os.path.isfile(p):
                return os.path.abspath(p)
        return None

    def export_limits(self):
        return {"max_seqs": max(self.batches), "max_tokens": self.max_tokens, "max_context": self.args.max_context}

    def export_covers(self, fmt):
        """The program exists and its limits (--max-seqs / --max-tokens / --max-context) cover this run."""
        r = self.load(f"export_{fmt}")
        return (self.ok(f"export_{fmt}") and os.path.isfile(self.pte(fmt))
                and all(r.get("limits", {}).get(k, 0) >= v for k, v in self.export_limits().items()))

    def stage_export(self):
        exporter = self.tool("exporter")
        for fmt in self.dtypes:
            name = f"export_{fmt}"
            if self.export_covers(fmt) and not self.args.force:
                r = self.load(name)
                print(f"export {fmt}: exists ({r['bytes'] / 1e9:.2f} GB, exported in {r['seconds']:.1f} s at {r['measured_at']})")
                continue
            if self.over_budget(f"export {fmt}"):
                continue
            if exporter is None:
                self.save(name, {"ok": False, "error": f"no exporter in {self.args.bin}"})
                print(f"export {fmt}: no exporter in {self.args.bin}", flush=True)
                continue
            if not self.ok("checkpoint"):
                self.save(name, {"ok": False, "error": "no checkpoint (run the checkpoint stage)"})
                print(f"export {fmt}: no checkpoint", flush=True)
                continue
            partial = self.pte(fmt) + ".partial.pte"
            cmd = [exporter, self.ckpt, "-o", partial] + self.export_flags() + ld.FORMATS[fmt]
            if self.manifest():
                cmd += ["--manifest", self.manifest()]
            log = os.path.join(self.logs, f"export_{fmt}.log")
            print(f"export {fmt}: {' '.join(cmd)}", flush=True)
            p, dt = ld.run(cmd, log, check=False, timeout=self.args.export_timeout)
            if p.returncode != 0:
                self.save(name, {"ok": False, "error": error_line(p), "seconds": round(dt, 1), "log": log})
                print(f"export {fmt}: FAILED (rc {p.returncode}, {dt:.1f} s): {error_line(p)}", flush=True)
                continue
            os.replace(partial, self.pte(fmt))
            size = os.path.getsize(self.pte(fmt))
            self.save(name, {"ok": True, "seconds": round(dt, 1), "bytes": size, "command": cmd, "log": log,
                             "manifest": self.manifest(), "limits": self.export_limits(),
                             "flags": " ".join(self.export_flags() + ld.FORMATS[fmt])})
            print(f"export {fmt}: {size / 1e9:.2f} GB in {dt:.1f} s", flush=True)

    # ---- prompts ------------------------------------------------------------------------------

    def prompts(self):
        """{'texts': [...], 'ids': [[...]]}: max(batches) distinct prompts of exactly prompt_tokens
        tokens as the runner encodes them (no BOS: the tokenizer adds none), or None without a runner.

        Qwen2's pre-tokenizer splits text into words with their leading space before any merge, so a
        prompt "the w1 w2 ..." encodes to ids("the") + ids(" w1") + ids(" w2") + ...: the ids of each
        word are asked once (runner --tokenizer T --encode "the w"), and random word sequences whose
        counts add up to prompt_tokens are put together without asking again. The first prompts are
        checked whole against the runner, and every run's prefill count (batch x prompt_tokens) too."""
        path = os.path.join(self.work, f"prompts_{self.args.prompt_tokens}.json")
        if os.path.isfile(path):
            with open(path) as f:
                cached = json.load(f)
            if len(cached["texts"]) >= max(self.batches):  # the same seed gives the same first prompts
                return cached
        runner = self.tool("runner")
        tok = os.path.join(self.ckpt, "tokenizer.json")
        if runner is None or not os.path.isfile(tok):
            return None
        log = os.path.join(self.logs, "encode.log")

        def encode(text):
            p, _ = ld.run([runner, "--tokenizer", tok, "--encode", text], log)
            return [int(x) for x in p.stdout.split()]

        head = encode("the")
        pieces = {}
        for w in sorted(set(ld.WORDS)):
            ids = encode("the " + w)
            if ids[:len(head)] != head:
                raise RuntimeError(f"'the {w}' does not start with the ids of 'the' ({ids} vs {head})")
            pieces[w] = ids[len(head):]
        singles = [w for w, ids in pieces.items() if len(ids) == 1]
        if not singles:
            raise RuntimeError("no word of the list encodes to one token; cannot fill prompts exactly")
        import random
        rng = random.Random(SEED)
        want = self.args.prompt_tokens - len(head)
        texts, ids_list, seen = [], [], set()
        words = sorted(pieces)
        while len(texts) < max(self.batches):
            seq, n = [], 0
            while n < want:
                fit = [w for w in words if len(pieces[w]) <= want - n]
                w = rng.choice(fit if fit else singles)
                seq.append(w)
                n += len(pieces[w])
            text = " ".join(["the"] + seq)
            if text in seen:
                continue
            seen.add(text)
            texts.append(text)
            ids_list.append(head + [i for w in seq for i in pieces[w]])
        for text, ids in list(zip(texts, ids_list))[:4]:
            got = encode(text)
            if got != ids:
                raise RuntimeError(f"prompt '{text}': runner encodes {got}, expected {ids}")
        record = {"texts": texts, "ids": ids_list, "tokens": self.args.prompt_tokens}
        with open(path, "w") as f:
            json.dump(record, f)
        return record

    # ---- ember --------------------------------------------------------------------------------

    def stage_ember(self):
        runner = self.tool("runner")
        prompts = None
        try:
            prompts = self.prompts()
        except Exception as e:  # noqa: BLE001 (reported per run below)
            prompt_error = f"building the prompts: {e}"
        else:
            prompt_error = f"no runner in {self.args.bin}" if runner is None else "no checkpoint tokenizer (run the checkpoint stage)"
        placements = {}
        for fmt in self.dtypes:
            for batch in self.batches:
                name = f"ember_{fmt}_b{batch}"
                if self.done(name):
                    r = self.load(name)
                    print(f"ember {fmt} b{batch}: exists ({r['decode_tps']:.1f} tok/s at {r['measured_at']})")
                    continue
                if self.over_budget(f"ember {fmt} b{batch}"):
                    continue
                if prompts is None:
                    self.save(name, {"ok": False, "error": prompt_error})
                    print(f"ember {fmt} b{batch}: {prompt_error}", flush=True)
                    continue
                if not self.export_covers(fmt):
                    exp = self.load(f"export_{fmt}")
                    why = (f"export failed: {exp['error']}" if exp and not exp.get("ok")
                           else "no program with these limits (run the export stage)")
                    self.save(name, {"ok": False, "error": why})
                    print(f"ember {fmt} b{batch}: {why}", flush=True)
                    continue
                if fmt not in placements:
                    placements[fmt] = self.placement(runner, fmt)
                where = placements[fmt]
                if not where["ok"]:
                    self.save(name, {"ok": False, "error": where["error"], "placement": where.get("lines")})
                    print(f"ember {fmt} b{batch}: {where['error']}", flush=True)
                    continue
                pfile = os.path.join(self.work, f"prompts_b{batch}.txt")
                with open(pfile, "w") as f:
                    f.write("\n".join(prompts["texts"][:batch]) + "\n")
                cmd = [runner, "--program", self.pte(fmt), "--mmap", "--backends", self.args.backends, "--prompts-file", pfile,
                       "--max-new-tokens", str(self.args.new_tokens), "--ignore-eos", "--temperature", "0",
                       "--repetition-penalty", "1"] + self.args.runner_arg
                log = os.path.join(self.logs, f"ember_{fmt}_b{batch}.log")
                p, wall = ld.run(cmd, log, check=False, timeout=self.args.run_timeout)
                m = ld.DECODE_RE.search(p.stderr)
                if p.returncode != 0 or not m:
                    err = error_line(p) if p.returncode != 0 else "no 'prefill: ...; decode: ...' line in the runner's stderr"
                    self.save(name, {"ok": False, "error": err, "rc": p.returncode, "wall_s": round(wall, 1), "log": log})
                    print(f"ember {fmt} b{batch}: FAILED (rc {p.returncode}, {wall:.1f} s): {err}", flush=True)
                    continue
                r = {"ok": True, "placement": where["lines"], "partial": where.get("partial", False), "prefill_tokens": int(m.group(1)), "prefill_s": float(m.group(2)),
                     "prefill_tps": float(m.group(3)), "decode_tokens": int(m.group(4)), "decode_s": float(m.group(5)),
                     "decode_tps": float(m.group(6)), "wall_s": round(wall, 1), "command": cmd, "log": log}
                want_prefill, want_decode = batch * self.args.prompt_tokens, batch * (self.args.new_tokens - 1)
                r["shape_ok"] = r["prefill_tokens"] == want_prefill and r["decode_tokens"] == want_decode
                if not r["shape_ok"]:
                    r["note"] = (f"prefill {r['prefill_tokens']} tokens (expected {want_prefill}), decode "
                                 f"{r['decode_tokens']} (expected {want_decode})")
                self.save(name, r)
                print(f"ember {fmt} b{batch}: decode {r['decode_tps']:.1f} tok/s ({r['decode_tokens']} tokens in "
                      f"{r['decode_s']:.3f} s), prefill {r['prefill_tps']:.1f} tok/s, wall {wall:.1f} s"
                      + (f"; {r['note']}" if not r["shape_ok"] else ""), flush=True)

    def placement(self, runner, fmt):
        """Where the program's step method runs with --backends B, from `runner --info`: a method
        without delegates that no listed backend takes runs on the portable kernels whatever
        --backends says ("whole method -> portable (cuda unavailable; portable kernels)"), and
        its figures must not pass for the backend's. ok: some requested backend runs it."""
        cmd = [runner, "--info", self.pte(fmt), "--backends", self.args.backends, "--mmap", "--verify", "structural"]
        log = os.path.join(self.logs, f"info_{fmt}.log")
        p, _ = ld.run(cmd, log, check=False, timeout=self.args.run_timeout)
        if p.returncode != 0:
            return {"ok": False, "error": f"runner --info: {error_line(p)}"}
        lines = [line.strip() for line in p.stdout.splitlines()
                 if line.strip().startswith(("whole method ->", "delegate "))]
        wanted = [b for b in self.args.backends.split(",") if b and b != "portable"]
        if not wanted:
            return {"ok": True, "lines": lines or ["whole method -> portable kernels"]}
        on = [line for line in lines for b in wanted if f"-> {b} (" in line]
        if not on:
            return {"ok": False, "lines": lines,
                    "error": "not on " + "/".join(wanted) + ": " + ("; ".join(lines) or "portable kernels")}
        portable = [line for line in lines if "-> portable (" in line or "-> none (" in line]
        return {"ok": True, "lines": lines, "partial": bool(portable)}

    # ---- hf -----------------------------------------------------------------------------------

    def stage_hf(self):
        todo = [b for b in self.batches if not self.done(f"hf_b{b}")]
        for b in self.batches:
            if b not in todo:
                r = self.load(f"hf_b{b}")
                print(f"hf b{b}: exists ({r['decode_tps']:.1f} tok/s at {r['measured_at']})")
        if not todo or self.over_budget("hf"):
            return
        try:
            import torch
            import transformers
        except ImportError as e:
            for b in todo:
                self.save(f"hf_b{b}", {"ok": False, "skipped": True, "error": f"transformers / torch not importable here ({e})"})
            print(f"hf: skipped: transformers / torch not importable with {sys.executable} ({e})", flush=True)
            return
        if not self.ok("checkpoint"):
            for b in todo:
                self.save(f"hf_b{b}", {"ok": False, "error": "no checkpoint (run the checkpoint stage)"})
            print("hf: no checkpoint", flush=True)
            return
        device = torch.device(self.torch_device())
        prompts = None
        try:
            prompts = self.prompts()
        except Exception as e:  # noqa: BLE001
            print(f"hf: no runner prompts ({e}); random ids instead", flush=True)
        if prompts is not None:
            ids_all = torch.tensor(prompts["ids"], dtype=torch.long)
            source = "the Ember prompts' ids"
        else:  # no runner here: random ids below the tokenizer's size, same shape
            g = torch.Generator().manual_seed(SEED)
            ids_all = torch.randint(0, 1150, (max(self.batches), self.args.prompt_tokens), generator=g)
            source = "random ids (no runner to encode the Ember prompts)"
        log = os.path.join(self.logs, "hf.log")
        t0 = time.time()
        # transformers 5 takes dtype= (4.x torch_dtype=); device_map may want accelerate: fall back.
        model, errors = None, []
        for extra in ({"dtype": torch.bfloat16, "device_map": str(device)}, {"dtype": torch.bfloat16},
                      {"torch_dtype": torch.bfloat16}):
            try:
                model = transformers.AutoModelForCausalLM.from_pretrained(
                    self.ckpt, attn_implementation=self.args.hf_attn, **extra)
                break
            except (TypeError, ValueError, ImportError) as e:
                errors.append(f"from_pretrained({', '.join(extra)}): {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}")
                print(f"hf: {errors[-1]}; trying without", flush=True)
        if model is None:
            for b in todo:
                self.save(f"hf_b{b}", {"ok": False, "error": "transformers cannot load the checkpoint: " + errors[-1]})
            return
        if model.dtype != torch.bfloat16:
            model = model.to(torch.bfloat16)
        model = model.to(device)
        model.eval()
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        sync()
        load_s = time.time() - t0
        eos = model.config.eos_token_id
        pad = eos[0] if isinstance(eos, list) else eos
        attn = getattr(model.config, "_attn_implementation", self.args.hf_attn)
        print(f"hf: transformers {transformers.__version__}, torch {torch.__version__}, loaded in {load_s:.1f} s on "
              f"{device} (attention {attn}); prompts: {source}", flush=True)
        n = self.args.new_tokens

        def generate(ids, new):
            sync()
            t = time.time()
            with torch.inference_mode():
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                     min_new_tokens=new, do_sample=False, pad_token_id=pad)
            sync()
            dt = time.time() - t
            if out.shape != (ids.shape[0], ids.shape[1] + new):
                raise RuntimeError(f"generate returned {tuple(out.shape)}, expected {(ids.shape[0], ids.shape[1] + new)}")
            return dt

        try:
            generate(ids_all[:1].to(device), 2)  # warm-up: kernels, cuBLAS handles, allocator
        except Exception as e:  # noqa: BLE001
            msg = f"warm-up generate: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            for b in todo:
                self.save(f"hf_b{b}", {"ok": False, "error": msg})
            print(f"hf: FAILED: {msg}", flush=True)
            return
        with open(log, "a") as lf:
            lf.write(f"# {utc_now()} transformers {transformers.__version__} torch {torch.__version__} device {device} "
                     f"attention {attn}, load {load_s:.1f} s, prompts: {source}\n")
            for b in todo:
                if self.over_budget(f"hf b{b}"):
                    continue
                ids = ids_all[:b].to(device)
                try:
                    t1 = min(generate(ids, 1) for _ in range(self.args.hf_repeats))
                    tn = min(generate(ids, n) for _ in range(self.args.hf_repeats))
                except Exception as e:  # noqa: BLE001 (out of memory at a large batch: record, go on)
                    msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                    self.save(f"hf_b{b}", {"ok": False, "error": msg})
                    lf.write(f"b{b}: {msg}\n")
                    print(f"hf b{b}: FAILED: {msg}", flush=True)
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                    continue
                r = {"ok": True, "batch": b, "t_1_s": round(t1, 4), "t_n_s": round(tn, 4), "new_tokens": n,
                     "decode_tps": b * (n - 1) / (tn - t1), "e2e_tps": b * n / tn, "load_s": round(load_s, 1),
                     "transformers": transformers.__version__, "torch": torch.__version__, "attention": attn,
                     "device": str(device), "prompts": source}
                self.save(f"hf_b{b}", r)
                lf.write(json.dumps(r) + "\n")
                print(f"hf b{b}: decode {r['decode_tps']:.1f} tok/s, end-to-end {r['e2e_tps']:.1f} tok/s "
                      f"(generate {n}: {tn:.3f} s, 1: {t1:.3f} s)", flush=True)
        model = None  # frees the weights before the next stage
        if device.type == "cuda":
            torch.cuda.empty_cache()

    # ---- roofline -----------------------------------------------------------------------------

    def step_bytes(self, fmt, batch):
        """Bytes one decode step streams, as llm_decode.py counts them."""
        context = self.args.prompt_tokens + self.args.new_tokens / 2
        return (ld.weight_bytes_per_step(self.config, fmt) + ld.kv_bytes_per_step(self.config, batch, context)
                + batch * self.config["hidden_size"] * 2)

    def stage_roofline(self):
        if self.done("roofline"):
            r = self.load("roofline")
            print(f"roofline: exists ({r['bandwidth_gbs']:.0f} GB/s at {r['measured_at']})")
            return
        if self.over_budget("roofline"):
            return
        import torch
        device = torch.device(self.torch_device())
        n = int(self.args.copy_gib * (1 << 30))
        src = torch.empty(n, dtype=torch.uint8, device=device).fill_(1)
        dst = torch.empty_like(src)
        times = []
        for i in range(6):  # the first is a warm-up
            if device.type == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                dst.copy_(src)
                b.record()
                b.synchronize()
                dt = a.elapsed_time(b) / 1e3
            else:
                t = time.perf_counter()
                dst.copy_(src)
                dt = time.perf_counter() - t
            if i:
                times.append(dt)
        del src, dst
        if device.type == "cuda":
            torch.cuda.empty_cache()
        bw = 2 * n / min(times) / 1e9
        r = {"ok": True, "device": str(device), "copy_bytes": n, "times_s": times, "bandwidth_gbs": bw,
             "context": self.args.prompt_tokens + self.args.new_tokens / 2, "formats": {}}
        for fmt in self.dtypes:
            per_batch = {str(b): {"step_bytes": self.step_bytes(fmt, b), "tps": bw * 1e9 * b / self.step_bytes(fmt, b)}
                         for b in self.batches}
            r["formats"][fmt] = per_batch
        # The convention: every parameter once (the whole embedding table too), 2 B for bf16,
        # 1 B for fp8, no KV: bandwidth / that, for comparison with its "191 / 382 tok/s".
        params = sum(int(torch.Size(shape).numel()) for _, shape in ld.tensor_shapes(self.config))
        r["all_params"] = {"parameters": params, "bf16_tps": bw * 1e9 / (2 * params), "fp8_tps": bw * 1e9 / params}
        self.save("roofline", r)
        print(f"roofline: {device} copy of {n / 2**30:g} GiB: {bw:.1f} GB/s (read + written, best of 5); batch 1: "
              + ", ".join(f"{fmt} {v['1']['step_bytes'] / 1e9:.3f} GB/step -> {v['1']['tps']:.1f} tok/s"
                          for fmt, v in r["formats"].items() if "1" in v), flush=True)

    # ---- report -------------------------------------------------------------------------------

    def machine_line(self):
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.sm",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
            gpu = smi.stdout.strip().replace("\n", "; ") if smi.returncode == 0 else f"nvidia-smi failed: {smi.stderr.strip()[:200]}"
        except (OSError, subprocess.TimeoutExpired) as e:
            gpu = f"no nvidia-smi ({e.__class__.__name__})"
        cpu = platform.processor() or "?"
        try:
            with open("/proc/cpuinfo") as f:
                cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
        except (OSError, StopIteration):
            pass
        return f"GPU: {gpu}; host: {cpu}, {os.cpu_count()} cores, {platform.node()}"

    def stage_report(self):
        c = self.config
        lines = []
        add = lines.append
        add(f"# Ember CUDA decode benchmark{' (TINY model, CPU smoke test)' if self.args.tiny else ''}")
        add("")
        add(f"machine: {self.machine_line()}")
        stamps = sorted(r["measured_at"] for r in map(self.load, self.result_names()) if r and r.get("ok"))
        if stamps:
            add(f"measured: {stamps[0]} to {stamps[-1]} UTC (work folder {self.work})")
        add(f"model: Qwen2ForCausalLM, hidden {c['hidden_size']}, {c['num_hidden_layers']} layers, "
            f"{c['num_attention_heads']}/{c['num_key_value_heads']} heads x {c['hidden_size'] // c['num_attention_heads']}, "
            f"intermediate {c['intermediate_size']}, vocab {c['vocab_size']}, "
            f"{'tied' if c['tie_word_embeddings'] else 'untied'}; random bf16 weights N(0, 0.02^2); "
            f"{self.args.prompt_tokens}-token prompts, {self.args.new_tokens} new tokens, greedy")
        ck = self.load("checkpoint")
        if ck and ck.get("ok"):
            add(f"checkpoint: {ck['parameters'] / 1e9:.3f} B parameters, {ck['bytes'] / 1e9:.2f} GB in {ck['shards']} "
                f"safetensors shards, written in {ck['seconds']:.1f} s on {ck['device']} (generate + copy to host "
                f"{ck['generate_s']:.1f} s, save {ck['save_s']:.1f} s)")
        else:
            add(f"checkpoint: {ck['error'] if ck else 'not written'}")
        exports = []
        for fmt in self.dtypes:
            e = self.load(f"export_{fmt}")
            exports.append(f"{fmt} ({e['flags']}) {e['bytes'] / 1e9:.2f} GB in {e['seconds']:.1f} s" if e and e.get("ok")
                           else f"{fmt} {'FAILED: ' + e['error'] if e else 'not run'}")
        add("export: " + "; ".join(exports))
        roof = self.load("roofline")
        if roof and roof.get("ok"):
            add(f"roofline: {roof['device']} copy of {roof['copy_bytes'] / 2**30:g} GiB, {roof['bandwidth_gbs']:.1f} GB/s "
                f"(read + written, best of 5); bytes per decode step at batch 1: "
                + ", ".join(f"{fmt} {v['1']['step_bytes'] / 1e9:.3f} GB" for fmt, v in roof["formats"].items() if "1" in v)
                + (f" (counting every parameter once instead, {roof['all_params']['parameters'] / 1e9:.3f} B x 2 B / 1 B, "
                   f"no KV: bf16 {roof['all_params']['bf16_tps']:.1f}, fp8 {roof['all_params']['fp8_tps']:.1f} tok/s)"
                   if "all_params" in roof else ""))
        else:
            add("roofline: not measured")
        hf_meta = next((self.load(f"hf_b{b}") for b in self.batches if (self.load(f"hf_b{b}") or {}).get("ok")), None)
        if hf_meta:
            add(f"HF: transformers {hf_meta['transformers']}, torch {hf_meta['torch']}, bf16, eager generate "
                f"(attention {hf_meta['attention']}, default cache) on {hf_meta['device']}, model loaded in "
                f"{hf_meta['load_s']:.1f} s; prompts: {hf_meta['prompts']}")
        add(f"Ember: runner --backends {self.args.backends} --prompts-file P --max-new-tokens {self.args.new_tokens} "
            f"--ignore-eos --temperature 0 --repetition-penalty 1 {' '.join(self.args.runner_arg)}".rstrip())
        for fmt in self.dtypes:
            placed = next((r for r in (self.load(f"ember_{fmt}_b{b}") for b in self.batches) if r and r.get("placement")), None)
            if placed:
                add(f"Ember {fmt} placement (runner --info): " + "; ".join(placed["placement"])[:400])
        add("")
        cols = [f"Ember {fmt} tok/s" for fmt in self.dtypes]
        add("| batch | " + " | ".join(cols) + " | HF bf16 decode tok/s | HF bf16 end-to-end tok/s | roofline "
            + " / ".join(self.dtypes) + " tok/s |")
        add("|---" * (len(cols) + 4) + "|")
        notes = []
        for b in self.batches:
            cells = [str(b)]
            for fmt in self.dtypes:
                r = self.load(f"ember_{fmt}_b{b}")
                if r and r.get("ok"):
                    cells.append(f"{r['decode_tps']:.1f}" + ("" if r.get("shape_ok", True) else " (!)")
                                 + (" (partly portable)" if r.get("partial") else ""))
                    if not r.get("shape_ok", True):
                        notes.append(f"(!) Ember {fmt} batch {b}: {r['note']}")
                else:
                    cells.append(cell_error(r))
            h = self.load(f"hf_b{b}")
            if h and h.get("ok"):
                cells += [f"{h['decode_tps']:.1f}", f"{h['e2e_tps']:.1f}"]
            else:
                cells += [cell_error(h), "—"]
            if b == 1 and roof and roof.get("ok"):
                cells.append(" / ".join(f"{roof['formats'][fmt]['1']['tps']:.1f}" for fmt in self.dtypes
                                        if "1" in roof["formats"].get(fmt, {})))
            else:
                cells.append("—")
            add("| " + " | ".join(cells) + " |")
        add("")
        add(f"Ember decode tok/s: the runner's decode line (tokens fed back, batch x {self.args.new_tokens - 1}, over the "
            f"time of the pure decode steps; with the export's --max-tokens a batch's whole prefill is one step). HF decode "
            f"tok/s: batch x {self.args.new_tokens - 1} / (t(generate {self.args.new_tokens}) - t(generate 1)); "
            f"end-to-end: batch x {self.args.new_tokens} / t(generate {self.args.new_tokens}), prefill included. "
            f"Roofline: bandwidth / bytes per step at batch 1.")
        lines += ([""] + notes) if notes else []
        failed = [(n, r) for n, r in ((n, self.load(n)) for n in self.result_names()) if r and not r.get("ok")]
        if failed:
            add("")
            add("Not measured / failed:")
            for n, r in failed:
                add(f"- {n}: {r.get('error', '?')}" + (f" (log {os.path.basename(r['log'])})" if r.get("log") else ""))
        text = "\n".join(lines) + "\n"
        print("\n" + text, flush=True)
        os.makedirs(self.out, exist_ok=True)
        with open(os.path.join(self.out, "bench_cuda.md"), "w") as f:
            f.write(text)
        with open(os.path.join(self.out, "bench_cuda.json"), "w") as f:
            json.dump({n: self.load(n) for n in self.result_names()}, f, indent=2)
        logs_out = os.path.join(self.out, "bench_cuda_logs")
        os.makedirs(logs_out, exist_ok=True)
        for p in glob.glob(os.path.join(self.logs, "*.log")):
            if os.path.getsize(p) <= self.args.max_log_bytes:
                shutil.copy(p, logs_out)
            else:  # the 512-prompt runs print every generated text: keep the head and the tail
                with open(p, "rb") as f, open(os.path.join(logs_out, os.path.basename(p)), "wb") as g:
                    half = self.args.max_log_bytes // 2
                    g.write(f.read(half))
                    g.write(b"\n[... cut ...]\n")
                    f.seek(-half, os.SEEK_END)
                    g.write(f.read())
        print(f"report: {os.path.join(self.out, 'bench_cuda.md')}")

    def result_names(self):
        names = ["checkpoint"] + [f"export_{f}" for f in self.dtypes]
        names += [f"ember_{f}_b{b}" for f in self.dtypes for b in self.batches]
        names += [f"hf_b{b}" for b in self.batches] + ["roofline"]
        return names


def error_line(p):
    """The line of a failed command's output that says why: the last one naming an error, else the last."""
    lines = [line.strip() for line in (p.stderr + "\n" + p.stdout).splitlines() if line.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or "timed out" in line:
            return line[:300]
    return (lines[-1][:300] if lines else f"exit status {p.returncode}, no output")


def cell_error(r):
    if r is None:
        return "(not run)"
    text = r.get("error", "?").replace("runner --info: ", "").replace("runner: error: ", "")
    text = text if len(text) <= 120 else text[:117] + "..."
    if r.get("skipped"):
        return "skipped (below)"
    return "error: " + text.replace("|", "\\|")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("stages", nargs="*", metavar="stage", help="any of " + ", ".join(STAGES) + " (default: all, in order)")
    tiny = os.environ.get("EMBER_BENCH_TINY", "") not in ("", "0")
    ap.add_argument("--tiny", action="store_true", default=tiny,
                    help="hidden 256, 2 layers, vocab 4096; portable backend; torch on the CPU (also EMBER_BENCH_TINY=1)")
    ap.add_argument("--work", help="checkpoint, programs, results, logs (default /tmp/ember_bench, tiny: /tmp/ember_bench_tiny)")
    ap.add_argument("--out", default=None, help="report folder (default $OUT, else WORK/out)")
    ap.add_argument("--bin", default=os.environ.get("EMBER_BENCH_BIN", os.path.join(REPO, "build", "gpu", "bin")),
                    help="folder with runner and exporter (flat, or a build tree)")
    ap.add_argument("--manifest", help="capabilities.json for the exporter (default: BIN/ or BIN/../capabilities.json if there)")
    ap.add_argument("--tokenizer-src", help="checkpoint folder whose tokenizer is used (default: qwen2_bf16 of the test checkpoints)")
    ap.add_argument("--backends", help="runner --backends (default cuda; tiny: portable)")
    ap.add_argument("--export-backends",
                    help="exporter --backends (default cuda, which needs the capability manifest; tiny: the exporter's default)")
    ap.add_argument("--device", help="torch device of the checkpoint, hf and roofline stages (default cuda; tiny: cpu)")
    ap.add_argument("--dtypes", default="bf16,fp8,fp8-dynamic", help="programs to export and run (llm_decode.FORMATS)")
    ap.add_argument("--batches", default="1,8,32,128,512")
    ap.add_argument("--prompt-tokens", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--max-context", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=0, help="exporter --max-tokens (default max batch x prompt tokens)")
    ap.add_argument("--runner-arg", action="append", default=[], help="extra runner argument (repeatable)")
    ap.add_argument("--run-timeout", type=float, default=300, help="seconds per runner invocation")
    ap.add_argument("--export-timeout", type=float, default=None, help="seconds per export")
    ap.add_argument("--hf-attn", default="sdpa", help="transformers attn_implementation (default sdpa, its default)")
    ap.add_argument("--hf-repeats", type=int, default=1, help="generate calls per batch and length (best kept)")
    ap.add_argument("--copy-gib", type=float, default=None, help="roofline copy size (default 4; tiny: 0.25)")
    ap.add_argument("--shard-gib", type=float, default=4.0)
    ap.add_argument("--budget-s", type=float, default=float(os.environ.get("EMBER_BENCH_BUDGET_S", "0") or 0),
                    help="start no new work item after this many seconds (0 = no limit; also EMBER_BENCH_BUDGET_S)")
    ap.add_argument("--max-log-bytes", type=int, default=256 << 10, help="per log copied to OUT")
    ap.add_argument("--force", action="store_true", help="redo the requested stages' work even where results exist")
    ap.add_argument("--strict", action="store_true", help="exit 3 when any measurement of this run failed")
    args = ap.parse_args(argv)
    unknown = [s for s in args.stages if s not in STAGES]
    if unknown:
        ap.error(f"unknown stage {', '.join(unknown)} (stages: {', '.join(STAGES)})")
    if args.tiny:
        args.work = args.work or "/tmp/ember_bench_tiny"
        args.backends = args.backends or "portable"
        args.export_backends = args.export_backends or ""
        args.copy_gib = args.copy_gib if args.copy_gib is not None else 0.25
    args.work = args.work or "/tmp/ember_bench"
    args.backends = args.backends or "cuda"
    args.export_backends = "cuda" if args.export_backends is None else args.export_backends
    args.copy_gib = args.copy_gib if args.copy_gib is not None else 4.0
    args.out = args.out or os.environ.get("OUT") or os.path.join(args.work, "out")
    stages = args.stages or list(STAGES)
    bench = Bench(args)
    print(f"== cuda_decode.py {' '.join(stages)} at {utc_now()} UTC; work {bench.work}, out {bench.out}, "
          f"bin {args.bin}, backends {args.backends}{', TINY' if args.tiny else ''}", flush=True)
    broke = False
    for stage in STAGES:
        if stage not in stages:
            continue
        t0 = time.time()
        try:
            getattr(bench, "stage_" + stage)()
        except Exception:  # noqa: BLE001 (a broken stage must not stop the others)
            broke = True
            print(f"== stage {stage} BROKE:\n{traceback.format_exc()}", flush=True)
        print(f"== stage {stage}: {time.time() - t0:.1f} s", flush=True)
    if bench.failures:
        print("failed this run: " + "; ".join(f"{n}: {e}" for n, e in bench.failures), flush=True)
    if broke:
        return 1
    return 3 if args.strict and bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())
