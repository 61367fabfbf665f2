#!/usr/bin/env python3
"""Tiny random-weight Hugging Face checkpoints of Llama, Qwen2 and Qwen3, laid out as the releases.

    /work/main/.venv/bin/python tests/llm/make_checkpoints.py --out tests/data/llm/checkpoints

writes one folder per variant (table below) and OUT/MANIFEST.json (the sha256 of every file written,
and a summary of each variant). The bytes are the same on every run (numpy 1.24.2 + ml_dtypes 0.5.4
+ safetensors 0.7.0 + tokenizers 0.22.2): weights come from numpy Generators seeded by (SEED, the
variant's weight seed, the tensor name), JSON is written with sorted keys, nothing holds a time.

Each folder holds what the releases hold:
  config.json             HF field names, `architectures` / `model_type` as the releases
                          (LlamaForCausalLM/llama, Qwen2ForCausalLM/qwen2, Qwen3ForCausalLM/qwen3),
                          legacy `rope_theta` / `rope_scaling` (as every release's config.json)
  model.safetensors       or model-0000{1,2}-of-00002.safetensors + model.safetensors.index.json
  generation_config.json  bos_token_id, eos_token_id (a list), sampling defaults of the releases
  tokenizer.json, tokenizer_config.json   from make_tokenizers.write_tokenizer ('llama3' for Llama,
                          'qwen2' for Qwen2 and Qwen3); vocab_size = the tokenizer's id count

Variants (hidden 128, 4 query heads, 2 KV heads (GQA), 2 layers, max_position_embeddings 512):
  llama_f32   float32, untied lm_head, llama3 rope_scaling (factor 8, low/high_freq_factor 1/4,
              original_max_position_embeddings 64: of the 16 frequencies of head_dim 32 at
              rope_theta 500000, 2 are kept, 1 is interpolated and 13 are divided by 8),
              rms_norm_eps 1e-5, eos_token_id a list, sharded in two files; the cut falls inside
              layer 0 (its MLP is in the second shard), as real shards may cut.
  llama_f16   float16, tied embeddings, no rope_scaling, rope_theta 10000, eos_token_id an int.
  qwen2_f32 / qwen2_bf16   the same weights in float32 and in bfloat16: q/k/v biases (o_proj has
              none), tied embeddings, rope_theta 1e6.
  qwen3_f32   float32, q_norm/k_norm, tied, explicit head_dim 64 != hidden_size / heads (32), as in
              Qwen3-0.6B / 4B (q_proj [256, 128], o_proj [128, 256]).
  qwen3_bf16 / qwen3_fp8   the same weights (head_dim 32, intermediate 384) in bfloat16 and in the
              layout of the official Qwen3-*-FP8 releases: every linear weight of the decoder layers
              float8_e4m3fn [N, K] + `<module>.weight_scale_inv` bfloat16 [ceil(N/128), ceil(K/128)]
              (w = f32(code) * f32(scale_inv)); embed_tokens (tied, so no lm_head) and the norms
              (incl. q_norm/k_norm) stay bfloat16; config.json has quantization_config
              {quant_method fp8, fmt e4m3, activation_scheme dynamic, weight_block_size [128, 128]}.
              k_proj and v_proj are [64, 128]: one partial 64x128 block (scale_inv [1, 1]).
              Quantization: per block, scale_inv = bf16(amax / 448) (1 if amax is 0),
              code = e4m3(clamp(w / scale_inv, +-448)) with ml_dtypes (round to nearest even;
              the clamp first: ml_dtypes does not saturate).

Weights (float32 masters, then cast with round to nearest even): q/k/v/gate/up N(0, 0.08^2),
o_proj/down_proj N(0, 0.2^2), embeddings and an untied lm_head N(0, 0.05^2), biases N(0, 0.1^2),
layer norm weights (incl. q_norm/k_norm) 1 + N(0, 0.1^2), the final norm 4 + N(0, 0.4^2). The
residual branches outweigh the embedding, so a tied model does not just predict its input token,
and the final norm gives logits a standard deviation of about 2.3 (top-2 gap median about 0.4), so
greedy sequences do not collapse into repeats. No weight set is all ones, so a missing norm shows.
tests/llm/check_reference_forward.py prints these statistics.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import zlib

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizers import write_tokenizer  # noqa: E402
from reference_forward import dequantize_fp8_block, read_checkpoint_tensors  # noqa: E402

SEED = 20261122
FP8_BLOCK = (128, 128)
E4M3_MAX = 448.0
TRANSFORMERS_VERSION = "4.51.0"  # what the config files claim to be written by (Qwen3's release)

BASE = {"hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "num_hidden_layers": 2, "intermediate_size": 256, "max_position_embeddings": 512}

VARIANTS = {
    "llama_f32": dict(family="llama", dtype="float32", weights="llama_a", tie=False, shards=2,
                      rope_theta=500000.0, rms_norm_eps=1e-5, eos_list=True,
                      rope_scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                    "original_max_position_embeddings": 64, "rope_type": "llama3"}),
    "llama_f16": dict(family="llama", dtype="float16", weights="llama_b", tie=True,
                      rope_theta=10000.0, rms_norm_eps=1e-5, eos_list=False),
    "qwen2_f32": dict(family="qwen2", dtype="float32", weights="qwen2_a", tie=True),
    "qwen2_bf16": dict(family="qwen2", dtype="bfloat16", weights="qwen2_a", tie=True),
    "qwen3_f32": dict(family="qwen3", dtype="float32", weights="qwen3_a", tie=True, head_dim=64),
    "qwen3_bf16": dict(family="qwen3", dtype="bfloat16", weights="qwen3_b", tie=True,
                       intermediate_size=384),
    "qwen3_fp8": dict(family="qwen3", dtype="fp8", weights="qwen3_b", tie=True,
                      intermediate_size=384),
    # Issue 17: Mistral = Llama's layers with a sliding window (8 positions: the 33-token prompt and
    # the greedy continuation attend a window shorter than their context).
    "mistral_f32": dict(family="mistral", dtype="float32", weights="mistral_a", tie=False,
                        rope_theta=1000000.0, rms_norm_eps=1e-5, sliding_window=8),
}

# Per family: tokenizer kind, architecture, the special tokens config/generation_config name, and
# the sampling defaults of the releases' generation_config.json.
FAMILIES = {
    "llama": dict(tokenizer="llama3", arch="LlamaForCausalLM", bos="<|begin_of_text|>",
                  eos=["<|end_of_text|>", "<|eot_id|>"], pad=None,
                  sampling={"do_sample": True, "temperature": 0.6, "top_p": 0.9}),
    "qwen2": dict(tokenizer="qwen2", arch="Qwen2ForCausalLM", bos="<|endoftext|>",
                  eos=["<|im_end|>", "<|endoftext|>"], pad="<|endoftext|>",
                  sampling={"do_sample": True, "repetition_penalty": 1.05, "temperature": 0.7,
                            "top_k": 20, "top_p": 0.8}),
    # Mistral's releases ship a SentencePiece tokenizer; the checkpoint embeds the Llama-3-style one
    # (the architecture test does not depend on it).
    "mistral": dict(tokenizer="llama3", arch="MistralForCausalLM", bos="<|begin_of_text|>",
                    eos=["<|end_of_text|>"], pad=None, sampling={}),
    "qwen3": dict(tokenizer="qwen2", arch="Qwen3ForCausalLM", bos="<|endoftext|>",
                  eos=["<|im_end|>", "<|endoftext|>"], pad="<|endoftext|>",
                  sampling={"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95}),
}

STORAGE_DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def dims(variant):
    """The model sizes of a variant: BASE overridden by the variant's own entries."""
    return {key: variant.get(key, value) for key, value in BASE.items()}


def special_ids(ckpt_dir):
    """{content: id} of the tokenizer's added (special) tokens."""
    with open(os.path.join(ckpt_dir, "tokenizer.json"), encoding="utf-8") as f:
        return {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}


def make_config(variant, vocab_size, ids):
    """config.json of a variant, with the fields (and only those) its family's releases have."""
    family = FAMILIES[variant["family"]]
    d = dims(variant)
    eos = [ids[t] for t in family["eos"]]
    config = {
        "architectures": [family["arch"]],
        "attention_dropout": 0.0,
        "bos_token_id": ids[family["bos"]],
        "eos_token_id": eos if variant.get("eos_list", False) else eos[0],
        "hidden_act": "silu",
        "hidden_size": d["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": d["intermediate_size"],
        "max_position_embeddings": d["max_position_embeddings"],
        "model_type": variant["family"],
        "num_attention_heads": d["num_attention_heads"],
        "num_hidden_layers": d["num_hidden_layers"],
        "num_key_value_heads": d["num_key_value_heads"],
        "rms_norm_eps": variant.get("rms_norm_eps", 1e-6),
        "rope_scaling": variant.get("rope_scaling"),
        "rope_theta": variant.get("rope_theta", 1000000.0),
        "tie_word_embeddings": variant["tie"],
        "torch_dtype": "bfloat16" if variant["dtype"] == "fp8" else variant["dtype"],
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": vocab_size,
    }
    if variant["family"] == "llama":
        config.update(attention_bias=False, head_dim=d["head_dim"], mlp_bias=False,
                      pretraining_tp=1)
    elif variant["family"] == "mistral":
        config.update(head_dim=d["head_dim"], sliding_window=variant["sliding_window"])
    else:  # Qwen2 and Qwen3 ship the (disabled) sliding-window fields.
        config.update(max_window_layers=d["num_hidden_layers"], sliding_window=None,
                      use_sliding_window=False)
    if variant["family"] == "qwen3":
        config.update(attention_bias=False, head_dim=d["head_dim"])
    if variant["dtype"] == "fp8":
        config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3",
                                         "quant_method": "fp8",
                                         "weight_block_size": list(FP8_BLOCK)}
    return config


def make_generation_config(variant, ids):
    family = FAMILIES[variant["family"]]
    config = {"bos_token_id": ids[family["bos"]], "eos_token_id": [ids[t] for t in family["eos"]],
              "transformers_version": TRANSFORMERS_VERSION, **family["sampling"]}
    if family["pad"] is not None:
        config["pad_token_id"] = ids[family["pad"]]
    return config


def normal(weight_seed, name, shape, std, mean=0.0):
    """float32 N(mean, std^2) of `shape` from a Generator seeded by (SEED, weight seed, name)."""
    key = [SEED, zlib.crc32(weight_seed.encode()), zlib.crc32(name.encode())]
    rng = np.random.default_rng(np.random.SeedSequence(key))
    return (mean + std * rng.standard_normal(shape)).astype(np.float32)


def make_master_weights(variant, vocab_size):
    """{HF tensor name: float32 array} in the releases' naming, before the storage cast."""
    d = dims(variant)
    seed = variant["weights"]
    hidden, inter, head_dim = d["hidden_size"], d["intermediate_size"], d["head_dim"]
    q_out = d["num_attention_heads"] * head_dim
    kv_out = d["num_key_value_heads"] * head_dim
    w = {"model.embed_tokens.weight": normal(seed, "embed", (vocab_size, hidden), 0.05)}
    for i in range(d["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes = {"self_attn.q_proj": (q_out, hidden), "self_attn.k_proj": (kv_out, hidden),
                  "self_attn.v_proj": (kv_out, hidden), "self_attn.o_proj": (hidden, q_out),
                  "mlp.gate_proj": (inter, hidden), "mlp.up_proj": (inter, hidden),
                  "mlp.down_proj": (hidden, inter)}
        for module, shape in shapes.items():
            std = 0.2 if module in ("self_attn.o_proj", "mlp.down_proj") else 0.08
            w[p + module + ".weight"] = normal(seed, p + module, shape, std)
        if variant["family"] == "qwen2":
            for proj, n in (("q", q_out), ("k", kv_out), ("v", kv_out)):
                w[p + f"self_attn.{proj}_proj.bias"] = normal(seed, p + proj + ".bias", (n,), 0.1)
        norms = ["input_layernorm", "post_attention_layernorm"]
        if variant["family"] == "qwen3":
            norms += ["self_attn.q_norm", "self_attn.k_norm"]
        for norm in norms:
            size = head_dim if norm.startswith("self_attn") else hidden
            w[p + norm + ".weight"] = normal(seed, p + norm, (size,), 0.1, mean=1.0)
    w["model.norm.weight"] = normal(seed, "norm", (hidden,), 0.4, mean=4.0)
    if not variant["tie"]:
        w["lm_head.weight"] = normal(seed, "lm_head", (vocab_size, hidden), 0.05)
    return w


def quantize_fp8_block(w):
    """(float8_e4m3fn codes [N, K], bfloat16 scale_inv [ceil(N/128), ceil(K/128)]) of a float32
    weight, block by block: scale_inv = bf16(amax / 448), code = e4m3(clamp(w / scale_inv))."""
    bn, bk = FP8_BLOCK
    n, k = w.shape
    codes = np.zeros((n, k), dtype=ml_dtypes.float8_e4m3fn)
    scale_inv = np.zeros((-(-n // bn), -(-k // bk)), dtype=ml_dtypes.bfloat16)
    for i in range(scale_inv.shape[0]):
        for j in range(scale_inv.shape[1]):
            block = w[i * bn:(i + 1) * bn, j * bk:(j + 1) * bk]
            amax = float(np.abs(block).max())
            scale = ml_dtypes.bfloat16(amax / E4M3_MAX) if amax > 0 else ml_dtypes.bfloat16(1.0)
            scaled = block / np.float32(scale)
            clamped = np.clip(scaled, -E4M3_MAX, E4M3_MAX)
            codes[i * bn:(i + 1) * bn, j * bk:(j + 1) * bk] = clamped.astype(
                ml_dtypes.float8_e4m3fn)
            scale_inv[i, j] = scale
    return codes, scale_inv


def to_storage(variant, master):
    """The stored tensors: master weights cast to the variant's dtype; for fp8, the decoder layers'
    linear weights quantized (plus their scale_inv) and everything else in bfloat16."""
    if variant["dtype"] != "fp8":
        return {name: w.astype(STORAGE_DTYPES[variant["dtype"]]) for name, w in master.items()}
    stored = {}
    for name, w in master.items():
        w16 = w.astype(ml_dtypes.bfloat16)  # the release is quantized from its bf16 weights
        if name.startswith("model.layers.") and name.endswith("_proj.weight"):
            stored[name], stored[name + "_scale_inv"] = quantize_fp8_block(w16.astype(np.float32))
        else:
            stored[name] = w16
    return stored


def write_safetensors(path, tensors):
    """One .safetensors file through the safetensors library (its own tensor order and header
    padding, as every release), with the {"format": "pt"} metadata torch writers add. ml_dtypes
    arrays are stored as BF16 / F8_E4M3."""
    save_file({name: np.ascontiguousarray(a) for name, a in tensors.items()}, path,
              metadata={"format": "pt"})


def write_json(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_weights(ckpt_dir, variant, tensors):
    """model.safetensors, or two shards + index: embeddings and layer 0's attention in the first,
    the rest (layer 0's MLP onwards) in the second."""
    if variant.get("shards", 1) == 1:
        write_safetensors(os.path.join(ckpt_dir, "model.safetensors"), tensors)
        return
    files = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    first = {n for n in tensors if n.startswith(("model.embed_tokens.", "model.layers.0.self_attn.",
                                                 "model.layers.0.input_layernorm."))}
    weight_map = {n: files[0] if n in first else files[1] for n in sorted(tensors)}
    for shard in files:
        write_safetensors(os.path.join(ckpt_dir, shard),
                          {n: a for n, a in tensors.items() if weight_map[n] == shard})
    total = sum(a.nbytes for a in tensors.values())
    write_json(os.path.join(ckpt_dir, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})


def write_checkpoint(ckpt_dir, variant):
    """Writes one variant's folder (emptied first); returns its MANIFEST summary."""
    os.makedirs(ckpt_dir, exist_ok=True)
    for stale in os.listdir(ckpt_dir):
        os.remove(os.path.join(ckpt_dir, stale))
    vocab_size = write_tokenizer(FAMILIES[variant["family"]]["tokenizer"], ckpt_dir)
    ids = special_ids(ckpt_dir)
    config = make_config(variant, vocab_size, ids)
    write_json(os.path.join(ckpt_dir, "config.json"), config)
    write_json(os.path.join(ckpt_dir, "generation_config.json"),
               make_generation_config(variant, ids))
    tensors = to_storage(variant, make_master_weights(variant, vocab_size))
    write_weights(ckpt_dir, variant, tensors)
    summary = {key: config[key] for key in ("architectures", "torch_dtype", "vocab_size",
                                            "tie_word_embeddings")}
    summary.update(dims(variant), weights_seed=variant["weights"], tensor_count=len(tensors),
                   weight_bytes=sum(a.nbytes for a in tensors.values()))
    return summary


def write_dequantized(src_dir, dst_dir):
    """A float32 copy of an FP8 checkpoint: every FP8 weight dequantized (w = f32(code) *
    f32(scale_inv), exact in float32), the bfloat16 tensors widened (exact), no scale_inv tensors
    and no quantization_config; tokenizer and generation_config copied."""
    with open(os.path.join(src_dir, "config.json")) as f:
        config = json.load(f)
    block = config.pop("quantization_config")["weight_block_size"]
    config["torch_dtype"] = "float32"
    tensors = read_checkpoint_tensors(src_dir)
    out = {}
    for name, array in tensors.items():
        if name.endswith("_scale_inv"):
            continue
        if array.dtype == ml_dtypes.float8_e4m3fn:
            out[name] = dequantize_fp8_block(array, tensors[name + "_scale_inv"], block)
        else:
            out[name] = array.astype(np.float32)
    os.makedirs(dst_dir, exist_ok=True)
    write_json(os.path.join(dst_dir, "config.json"), config)
    write_safetensors(os.path.join(dst_dir, "model.safetensors"), out)
    for file in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(src_dir, file), os.path.join(dst_dir, file))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output folder (one subfolder per variant)")
    args = parser.parse_args(argv)
    manifest = {"generator": "tests/llm/make_checkpoints.py", "seed": SEED, "variants": {},
                "files": {}}
    for name, variant in VARIANTS.items():
        ckpt_dir = os.path.join(args.out, name)
        manifest["variants"][name] = write_checkpoint(ckpt_dir, variant)
        for file in sorted(os.listdir(ckpt_dir)):
            manifest["files"][f"{name}/{file}"] = sha256(os.path.join(ckpt_dir, file))
        size = sum(os.path.getsize(os.path.join(ckpt_dir, f)) for f in os.listdir(ckpt_dir))
        print(f"{name:11s} {size / 1e6:6.2f} MB  -> {ckpt_dir}")
    write_json(os.path.join(args.out, "MANIFEST.json"), manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
