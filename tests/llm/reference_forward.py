#!/usr/bin/env python3
"""An independent numpy forward pass of Hugging Face Llama / Qwen2 / Qwen3 checkpoints.

Reads a checkpoint folder as transformers would (config.json, model.safetensors or the shards named
by model.safetensors.index.json, FP8 block-quantized weights with their `weight_scale_inv`) and
computes the logits of one sequence with full causal attention (no KV cache, no paging):

    model = load(checkpoint_dir)                  # compute dtype float64 (default) or float32
    logits = model.logits([1200, 5, 17])          # float array [T, vocab]
    new_ids = generate_greedy(model, [[1200, 5], [7]], n_new=16)   # only the new ids, per prompt

Written from the transformers modeling code (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM),
not from Ember's:
  - RMSNorm: x * rsqrt(mean(x^2) + eps) * weight (HF upcasts to f32 for bf16/f16 models; here every
    operation runs in the compute dtype, which is f32 or f64 for every checkpoint dtype).
  - RoPE as HF's rotate_half form on the two halves of each head (cos/sin of emb = [freqs, freqs]).
    inv_freq is computed in float32 exactly as `_compute_default_rope_parameters` /
    `_compute_llama3_parameters` do, and so is the angle position * inv_freq (HF multiplies in f32);
    cos/sin are then taken in the compute dtype.
  - Qwen2: q/k/v projections have biases, o_proj has none. Qwen3: q_norm / k_norm are RMSNorms over
    head_dim applied per head before RoPE. Llama/Qwen3: `attention_bias` adds biases to all four.
  - GQA: query head h reads key/value head h // (heads / kv_heads). Scores scaled by head_dim^-0.5,
    causal mask, softmax over keys.
  - MLP: down(silu(gate(x)) * up(x)). Tied embeddings: the LM head is embed_tokens.
  - FP8 (quantization_config.quant_method == "fp8", e4m3, weight_block_size [bn, bk]): a weight
    stored as float8_e4m3fn [N, K] with `<name>_scale_inv` [ceil(N/bn), ceil(K/bk)] dequantizes to
    w[n, k] = f32(code[n, k]) * f32(scale_inv[n // bn, k // bk]) (weight-only; no activation
    quantization).
Every tensor in the checkpoint must be used, or load() fails (as Ember's importer must).
"""

import json
import math
import os
import struct

import ml_dtypes
import numpy as np

# safetensors dtype codes -> numpy dtypes.
SAFETENSORS_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
    "F8_E4M3": ml_dtypes.float8_e4m3fn, "I64": np.int64, "I32": np.int32, "U8": np.uint8,
}

ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
                 "Qwen3ForCausalLM": "qwen3", "MistralForCausalLM": "mistral"}


def read_safetensors(path):
    """{name: numpy array in its stored dtype} from one .safetensors file (own parser: 8-byte
    little-endian header length, JSON header, raw little-endian data)."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = np.dtype(SAFETENSORS_DTYPES[info["dtype"]])
        begin, end = info["data_offsets"]
        count = int(np.prod(info["shape"], dtype=np.int64))
        if end - begin != count * dtype.itemsize or base + end > len(data):
            raise ValueError(f"{path}: tensor {name}: bad data_offsets {info['data_offsets']}")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=base + begin)
        tensors[name] = array.reshape(info["shape"]).copy()
    return tensors


def read_checkpoint_tensors(ckpt_dir):
    """All tensors of a checkpoint folder: the shards of model.safetensors.index.json (each name in
    the file the index says) or model.safetensors."""
    index_path = os.path.join(ckpt_dir, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        return read_safetensors(os.path.join(ckpt_dir, "model.safetensors"))
    with open(index_path) as f:
        weight_map = json.load(f)["weight_map"]
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        for name, array in read_safetensors(os.path.join(ckpt_dir, shard)).items():
            if weight_map.get(name) != shard:
                raise ValueError(f"{shard}: tensor {name} is not mapped to this shard by the index")
            tensors[name] = array
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise ValueError(f"{ckpt_dir}: tensors in the index but in no shard: {missing[:5]}")
    return tensors


def dequantize_fp8_block(codes, scale_inv, block):
    """float32 [N, K] from float8_e4m3fn codes [N, K] and block scales [ceil(N/bn), ceil(K/bk)]."""
    bn, bk = block
    n, k = codes.shape
    if scale_inv.shape != (-(-n // bn), -(-k // bk)):
        raise ValueError(f"scale_inv shape {scale_inv.shape} does not match weight {codes.shape} "
                         f"with blocks {block}")
    scales = np.repeat(np.repeat(scale_inv.astype(np.float32), bn, axis=0), bk, axis=1)[:n, :k]
    return codes.astype(np.float32) * scales


def rope_inv_freq(config, head_dim):
    """inv_freq [head_dim / 2] as float32, computed as transformers computes it (f32 tensors).
    Reads the releases' `rope_theta` + `rope_scaling`, or transformers 5's `rope_parameters`."""
    f32 = np.float32
    scaling = config.get("rope_parameters") or config.get("rope_scaling") or {}
    base = f32(scaling.get("rope_theta", config.get("rope_theta", 10000.0)))
    exponents = np.arange(0, head_dim, 2, dtype=np.int64).astype(f32) / f32(head_dim)
    inv_freq = f32(1.0) / (base ** exponents)
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "default":
        return inv_freq
    if rope_type != "llama3":
        raise NotImplementedError(f"rope_scaling type {rope_type!r}")
    factor = f32(scaling["factor"])
    low_freq_factor = f32(scaling["low_freq_factor"])
    high_freq_factor = f32(scaling["high_freq_factor"])
    old_context_len = f32(scaling["original_max_position_embeddings"])
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    # torch evaluates `scalar / tensor` as tensor.reciprocal() * scalar.
    wavelen = (f32(1) / inv_freq) * f32(2 * math.pi)
    # Long wavelengths are divided by `factor`, short ones kept, the band between interpolated.
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (((f32(1) / wavelen) * old_context_len - low_freq_factor)
              / (high_freq_factor - low_freq_factor))
    smoothed = (f32(1) - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(is_medium, smoothed, scaled).astype(f32)


class Model:
    """A loaded checkpoint: config, weights in the compute dtype, and `logits(token_ids)`."""

    def __init__(self, config, tensors, dtype=np.float64):
        arch = config["architectures"][0]
        if arch not in ARCHITECTURES or ARCHITECTURES[arch] != config["model_type"]:
            raise ValueError(f"unsupported architectures/model_type {arch}/{config['model_type']}")
        self.config = config
        self.family = config["model_type"]
        self.dtype = np.dtype(dtype)
        self.hidden_size = config["hidden_size"]
        self.num_heads = config["num_attention_heads"]
        self.num_kv_heads = config.get("num_key_value_heads", self.num_heads)
        self.head_dim = config.get("head_dim") or self.hidden_size // self.num_heads
        self.eps = config["rms_norm_eps"]
        self.vocab_size = config["vocab_size"]
        if config.get("hidden_act", "silu") != "silu":
            raise NotImplementedError(f"hidden_act {config['hidden_act']!r}")
        if config.get("use_sliding_window") or config.get("partial_rotary_factor", 1.0) != 1.0:
            raise NotImplementedError("sliding-window attention or partial rotary embeddings")
        self._block = self._fp8_block(config)
        self._tensors = dict(tensors)

        self.embed = self._take("model.embed_tokens.weight")
        self.layers = [self._take_layer(i) for i in range(config["num_hidden_layers"])]
        self.norm = self._take("model.norm.weight")
        if config.get("tie_word_embeddings", False):
            self.lm_head = self.embed
        else:
            self.lm_head = self._take("lm_head.weight")
        if self._tensors:
            raise ValueError(f"unused tensors in checkpoint: {sorted(self._tensors)[:8]}")
        del self._tensors
        self.inv_freq = rope_inv_freq(config, self.head_dim)

    @staticmethod
    def _fp8_block(config):
        quant = config.get("quantization_config")
        if quant is None:
            return None
        if quant.get("quant_method") != "fp8" or quant.get("fmt", "e4m3") != "e4m3":
            raise NotImplementedError(f"quantization_config {quant}")
        return tuple(quant["weight_block_size"])

    def _take(self, name, optional=False):
        """Removes tensor `name` from the checkpoint, dequantized if FP8, in the compute dtype."""
        if name not in self._tensors:
            if optional:
                return None
            raise KeyError(f"checkpoint has no tensor {name}")
        array = self._tensors.pop(name)
        if array.dtype == ml_dtypes.float8_e4m3fn:
            if self._block is None:
                raise ValueError(f"{name} is float8 but config.json has no fp8 quantization_config")
            array = dequantize_fp8_block(array, self._tensors.pop(name + "_scale_inv"), self._block)
        return array.astype(self.dtype)

    def _take_layer(self, i):
        p = f"model.layers.{i}."
        attention_bias = self.config.get("attention_bias", False)
        qkv_bias = self.family == "qwen2" or attention_bias
        layer = {
            "input_norm": self._take(p + "input_layernorm.weight"),
            "post_norm": self._take(p + "post_attention_layernorm.weight"),
            "gate": self._take(p + "mlp.gate_proj.weight"),
            "up": self._take(p + "mlp.up_proj.weight"),
            "down": self._take(p + "mlp.down_proj.weight"),
        }
        for proj, has_bias in (("q", qkv_bias), ("k", qkv_bias), ("v", qkv_bias),
                               ("o", attention_bias)):
            layer[proj] = self._take(p + f"self_attn.{proj}_proj.weight")
            bias = p + f"self_attn.{proj}_proj.bias"
            layer[proj + "_bias"] = self._take(bias) if has_bias else None
        if self.family == "qwen3":
            layer["q_norm"] = self._take(p + "self_attn.q_norm.weight")
            layer["k_norm"] = self._take(p + "self_attn.k_norm.weight")
        return layer

    def _rms_norm(self, x, weight):
        variance = np.mean(x * x, axis=-1, keepdims=True)
        return x / np.sqrt(variance + self.dtype.type(self.eps)) * weight

    @staticmethod
    def _linear(x, weight, bias):
        y = x @ weight.T
        return y if bias is None else y + bias

    def _rope(self, x, cos, sin):
        """x [T, heads, head_dim]; cos/sin [T, head_dim / 2]; HF's rotate_half convention."""
        half = self.head_dim // 2
        x1, x2 = x[..., :half], x[..., half:]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)

    def _attention(self, layer, h, cos, sin, mask):
        t = h.shape[0]
        heads, kv_heads, d = self.num_heads, self.num_kv_heads, self.head_dim
        q = self._linear(h, layer["q"], layer["q_bias"]).reshape(t, heads, d)
        k = self._linear(h, layer["k"], layer["k_bias"]).reshape(t, kv_heads, d)
        v = self._linear(h, layer["v"], layer["v_bias"]).reshape(t, kv_heads, d)
        if self.family == "qwen3":
            q = self._rms_norm(q, layer["q_norm"])
            k = self._rms_norm(k, layer["k_norm"])
        q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
        # [T, heads, head_dim]: query head h reads kv head h // (heads / kv_heads).
        k = np.repeat(k, heads // kv_heads, axis=1)
        v = np.repeat(v, heads // kv_heads, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * self.dtype.type(d ** -0.5)
        scores = np.where(mask, scores, -np.inf)
        scores = scores - scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        out = np.einsum("hqk,khd->qhd", probs, v).reshape(t, heads * d)
        return self._linear(out, layer["o"], layer["o_bias"])

    def logits(self, token_ids):
        """Logits [T, vocab] (compute dtype) of one sequence at positions 0 .. T-1."""
        ids = np.asarray(token_ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= self.vocab_size:
            raise ValueError("token_ids must be a non-empty list of ids below vocab_size")
        t = ids.size
        # HF: freqs = inv_freq (f32) @ positions (f32), in f32; cos/sin of that angle.
        angles = np.arange(t, dtype=np.float32)[:, None] * self.inv_freq[None, :]
        cos, sin = np.cos(angles.astype(self.dtype)), np.sin(angles.astype(self.dtype))
        mask = np.tril(np.ones((t, t), dtype=bool))
        window = self.config.get("sliding_window") if self.family == "mistral" else None
        if window:  # transformers' sliding_window_overlay: key j visible from query i when i - j < window
            mask &= np.triu(np.ones((t, t), dtype=bool), -(window - 1))
        mask = mask[None]
        x = self.embed[ids]
        for layer in self.layers:
            x = x + self._attention(layer, self._rms_norm(x, layer["input_norm"]), cos, sin, mask)
            h = self._rms_norm(x, layer["post_norm"])
            gate = self._linear(h, layer["gate"], None)
            act = gate / (1 + np.exp(-gate)) * self._linear(h, layer["up"], None)
            x = x + self._linear(act, layer["down"], None)
        return self._rms_norm(x, self.norm) @ self.lm_head.T


def load_config(ckpt_dir):
    with open(os.path.join(ckpt_dir, "config.json")) as f:
        return json.load(f)


def load(ckpt_dir, dtype=np.float64):
    """The checkpoint in `ckpt_dir` as a Model computing in `dtype` (np.float64 or np.float32)."""
    return Model(load_config(ckpt_dir), read_checkpoint_tensors(ckpt_dir), dtype)


def generate_greedy(model, prompts, n_new):
    """For each prompt (a list of ids), the n_new ids that greedy decoding appends (argmax, first
    index on ties; EOS does not stop it). Each step recomputes the whole sequence."""
    results = []
    for prompt in prompts:
        ids = list(prompt)
        for _ in range(n_new):
            ids.append(int(np.argmax(model.logits(ids)[-1])))
        results.append(ids[len(prompt):])
    return results
