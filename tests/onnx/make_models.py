#!/usr/bin/env python3
"""Makes one ONNX test case (model, inputs, PyTorch and onnxruntime references) into a cache folder.

  .venv/bin/python tests/onnx/make_models.py --cache DIR CASE [CASE ...]
  .venv/bin/python tests/onnx/make_models.py --cache DIR --all

For CASE (see cases.py) it writes DIR/CASE/: model.onnx, the inputs, PyTorch's and onnxruntime's
outputs on them (.npy), and meta.json (names, opset, versions, the references' agreement, timings).
Nothing is downloaded: torchvision models are built with weights=None and every parameter and every
BatchNorm buffer is then drawn from the seed (BN running statistics are calibrated on one seeded
random batch and then perturbed, so activations stay O(1) while BN folding sees non-trivial mean,
var, scale and shift). Models are exported with TrainingMode.PRESERVE on an eval-mode model, which
keeps BatchNormalization nodes in the graph (TrainingMode.EVAL would fold them into the convolutions
in PyTorch's exporter, and Ember's folding would never run).

A case is cached: when DIR/CASE/meta.json carries the stamp of this script, cases.py, the case, the
seed and the library versions, nothing is redone. Writes go to a temporary folder renamed at the end,
so an interrupted run leaves no half case behind.
"""
import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cases as case_table  # noqa: E402

DEFAULT_SEED = 20240611
REF_TOLERANCE = 1e-4   # PyTorch vs onnxruntime: the references must agree before Ember is judged
# PyTorch f32 vs the same model in f64: a model whose f32 result is this far from exact is too
# ill-conditioned to judge an f32 runtime at 1e-4 (rounding differences would decide the test).
F64_TOLERANCE = 2e-5
# Scales of BatchNorm/LayerNorm weights. With scales around 1, deep random residual networks are
# chaotic: resnet152's f32 output is 1e-4 from its f64 output and efficientnet_b6's 1e-2 (logits
# std 350). Scales below 1 keep each residual branch smaller than its skip path, and every f32
# result within ~1e-6 of f64.
NORM_SCALE = (0.25, 0.75)
# The last layer of every residual branch (the BN of ResNet's bn3, the projection of an inverted
# residual, a transformer block's output projections, ConvNeXt's layer scale) is further scaled by
# this, as zero_init_residual / layer-scale training leaves them: random ReLU/BN residual networks
# otherwise amplify rounding errors block after block (resnet152: 1e-4 from f64; 6e-6 with this).
BRANCH_SCALE = (0.1, 0.3)
# Residual blocks of torchvision 0.14 -> the attributes holding their residual branches.
RESIDUAL_BRANCHES = {
    "BasicBlock": ("bn2",), "Bottleneck": ("bn3",),                      # ResNet, ResNeXt, Wide
    "InvertedResidual": ("conv", "block"),                               # MobileNetV2 / V3
    "MBConv": ("block", "layers"), "FusedMBConv": ("block",),            # EfficientNet(V2), MaxViT
    "_InvertedResidual": ("layers",), "ResBottleneckBlock": ("f",),      # MnasNet, RegNet
    "EncoderBlock": ("self_attention", "mlp"),                           # ViT
    "SwinTransformerBlock": ("attn", "mlp"), "SwinTransformerBlockV2": ("norm1", "norm2"),
    "PartitionAttentionLayer": ("attn_layer", "mlp_layer"),              # MaxViT
}


def rel_l2(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    denom = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / (denom if denom > 0 else 1.0))


def versions():
    import onnx
    import torch
    out = {"torch": torch.__version__, "onnx": onnx.__version__, "numpy": np.__version__}
    try:
        import torchvision
        out["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    try:
        import onnxruntime
        out["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        out["onnxruntime"] = None
    return out


# What of cases.py a made case depends on besides its own row (the rest, e.g. which cases CI runs or
# which are known gaps, may change without remaking anything).
GENERATION_KEYS = ("kind", "model", "opset", "shape", "options")
GENERATION_CONSTANTS = ("BATCHES", "BATCH_MAX", "BERT_SEQ", "BERT_BATCHES", "BERT_DYNSEQ_RUNS",
                        "BERT_MAX", "TORCH_MAX_OPSET")


def stamp(name, spec, seed, vers):
    h = hashlib.sha256()
    with open(os.path.join(HERE, "make_models.py"), "rb") as fh:
        h.update(fh.read())
    row = {k: spec.get(k) for k in GENERATION_KEYS}
    consts = {k: getattr(case_table, k, None) for k in GENERATION_CONSTANTS}
    h.update(json.dumps([name, row, consts, seed, vers], sort_keys=True, default=str).encode())
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------
# Randomization


def randomize(model, seed, calib_shape=None):
    """Draws every parameter and BN buffer from `seed`; returns counts for meta.json."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(seed)

    def normal(t, std, mean=0.0):
        t.copy_(torch.randn(t.shape, generator=g) * std + mean)

    def uniform(t, lo, hi):
        t.copy_(torch.rand(t.shape, generator=g) * (hi - lo) + lo)

    done = set()
    bns = []
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)):
                fan_in = mod.weight[0].numel()
                gain = math.sqrt(2.0) if not isinstance(mod, nn.Linear) else 1.0
                normal(mod.weight, gain / math.sqrt(fan_in))
                done.add(id(mod.weight))
                if mod.bias is not None:
                    normal(mod.bias, 0.1)
                    done.add(id(mod.bias))
            elif isinstance(mod, nn.modules.batchnorm._BatchNorm):
                if mod.affine:
                    uniform(mod.weight, *NORM_SCALE)
                    normal(mod.bias, 0.1)
                    done.update((id(mod.weight), id(mod.bias)))
                bns.append(mod)
            elif isinstance(mod, (nn.LayerNorm, nn.GroupNorm)):
                if mod.weight is not None:
                    uniform(mod.weight, *NORM_SCALE)
                    done.add(id(mod.weight))
                if mod.bias is not None:
                    normal(mod.bias, 0.1)
                    done.add(id(mod.bias))
            elif isinstance(mod, nn.Embedding):
                normal(mod.weight, 1.0)
                done.add(id(mod.weight))
        # Everything else (class tokens, position embeddings, relative-position tables, layer scales,
        # Swin-v2 logit scales): keep the sign and rough size of the default, perturbed.
        others = 0
        for name, p in model.named_parameters():
            if id(p) in done:
                continue
            others += 1
            if "layer_scale" in name:
                uniform(p, *BRANCH_SCALE)   # ConvNeXt: the scale of each residual branch
            else:
                scale = torch.rand(p.shape, generator=g) + 0.5
                p.copy_(p * scale + torch.randn(p.shape, generator=g) * 0.1)
        # Residual branches end small (see BRANCH_SCALE).
        branch_ends = 0
        leaf_types = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear, nn.modules.batchnorm._BatchNorm,
                      nn.LayerNorm, nn.GroupNorm)
        for mod in model.modules():
            for attr in RESIDUAL_BRANCHES.get(type(mod).__name__, ()):
                branch = getattr(mod, attr, None)
                if not isinstance(branch, nn.Module):
                    continue
                last = [m for m in branch.modules() if isinstance(m, leaf_types)]
                if not last or getattr(last[-1], "weight", None) is None:
                    continue
                end = last[-1]
                f = torch.rand(end.weight.shape[0], generator=g) * (BRANCH_SCALE[1] - BRANCH_SCALE[0]) \
                    + BRANCH_SCALE[0]
                end.weight.mul_(f.reshape((-1,) + (1,) * (end.weight.dim() - 1)))
                if getattr(end, "bias", None) is not None:
                    end.bias.mul_(f)
                branch_ends += 1
        # BN running statistics: the statistics of one seeded random batch (cumulative average,
        # unbiased variance), then perturbed so that folding must use them exactly.
        if bns:
            assert calib_shape is not None
            was = [(m.momentum, m.training) for m in bns]
            for m in bns:
                m.reset_running_stats()
                m.momentum = None
                m.train()
            # A batch large enough for sound per-channel statistics where the last feature map is
            # 1x1 or 2x2; smaller at 224x224, where each image has many positions.
            n = 16 if calib_shape[-1] <= 128 else 4
            calib = torch.randn((n,) + tuple(calib_shape[1:]), generator=g)
            model(calib)
            for m, (mom, _) in zip(bns, was):
                m.momentum = mom
                m.eval()
                var = m.running_var.clamp_min(max(1e-3, 1e-2 * float(m.running_var.median())))
                m.running_var.copy_(var * (torch.rand(var.shape, generator=g) * 1.5 + 0.5))
                m.running_mean.add_(torch.randn(var.shape, generator=g) * 0.2 * var.sqrt())
    n_params = sum(p.numel() for p in model.parameters())
    return {"parameters": n_params, "other_parameters": others, "batchnorms": len(bns),
            "residual_branch_ends": branch_ends}


# ----------------------------------------------------------------------------------------------
# Models


def build_tv(spec):
    import torchvision
    fn = getattr(torchvision.models, spec["model"])
    return fn(weights=None, **spec.get("options", {}))


class BertEncoder:
    """A small BERT-style encoder (built lazily so importing this file needs no torch)."""

    VOCAB, HIDDEN, HEADS, FFN, LAYERS, MAX_POS = 1000, 64, 4, 256, 2, 64

    @classmethod
    def make(cls):
        import torch
        from torch import nn

        class Layer(nn.Module):
            def __init__(self, hidden, heads, ffn, library_norm, exact_gelu):
                super().__init__()
                self.heads, self.dim = heads, hidden // heads
                self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
                self.o = nn.Linear(hidden, hidden)
                self.ff1, self.ff2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
                self.ln1, self.ln2 = nn.LayerNorm(hidden, eps=1e-12), nn.LayerNorm(hidden, eps=1e-12)
                self.library_norm = library_norm
                self.gelu = nn.GELU(approximate="none" if exact_gelu else "tanh")

            def norm(self, ln, x):
                if self.library_norm:
                    return ln(x)
                # The expansion older exporters and hand-written models produce:
                # ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt / Div / Mul / Add.
                mean = x.mean(-1, keepdim=True)
                var = (x - mean).pow(2).mean(-1, keepdim=True)
                return (x - mean) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias

            def forward(self, h, mask):
                b, s = h.shape[0], h.shape[1]

                def split(t):
                    return t.reshape(b, s, self.heads, self.dim).transpose(1, 2)

                q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
                scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dim)
                scores = torch.where(mask, torch.tensor(-1e9, dtype=scores.dtype), scores)
                probs = torch.softmax(scores, dim=-1)
                ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, self.heads * self.dim)
                h = self.norm(self.ln1, h + self.o(ctx))
                return self.norm(self.ln2, h + self.ff2(self.gelu(self.ff1(h))))

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(cls.VOCAB, cls.HIDDEN)
                self.pos = nn.Embedding(cls.MAX_POS, cls.HIDDEN)
                self.register_buffer("position_ids", torch.arange(cls.MAX_POS).unsqueeze(0))
                self.ln = nn.LayerNorm(cls.HIDDEN, eps=1e-12)
                # Layer 0: LayerNorm + exact (erf) GELU; layer 1: the LN expansion + tanh GELU.
                self.layers = nn.ModuleList([
                    Layer(cls.HIDDEN, cls.HEADS, cls.FFN, library_norm=True, exact_gelu=True),
                    Layer(cls.HIDDEN, cls.HEADS, cls.FFN, library_norm=False, exact_gelu=False),
                ])

            def forward(self, input_ids):
                b, s = input_ids.shape[0], input_ids.shape[1]
                pos = self.position_ids[:, :s]
                h = self.ln(self.tok(input_ids) + self.pos(pos))
                # Padding mask: Equal, then Unsqueeze + Expand to [B, heads, S, S]; applied with Where.
                pad = torch.eq(input_ids, 0)
                mask = pad.unsqueeze(1).unsqueeze(2).expand(b, cls.HEADS, s, s)
                for layer in self.layers:
                    h = layer(h, mask)
                return h

        return Encoder()

    @classmethod
    def ids(cls, batch, seq, g):
        import torch
        ids = torch.randint(1, cls.VOCAB, (batch, seq), generator=g)
        for r in range(1, batch):   # row 0 unpadded, the others padded (token 0) at the end
            n = int(torch.randint(seq // 2, seq, (1,), generator=g))
            ids[r, n:] = 0
        return ids


# ----------------------------------------------------------------------------------------------
# Export and references


def torch_export(model, example, path, opset, input_names, output_names, dynamic_axes=None):
    """Exports the eval-mode `model`, keeping BatchNormalization nodes (see the file's docstring)."""
    import torch
    import torch.nn.functional as F
    assert not model.training
    # torchvision 0.14's Swin calls F.dropout(attn, p=0.0) without training=, i.e. training=True.
    # TrainingMode.EVAL would export that as nothing; PRESERVE keeps it as a Dropout node with
    # training_mode=1 that no eval-mode export contains, so dropout is made eval-mode here.
    dropout = F.dropout

    def eval_dropout(input, p=0.5, training=True, inplace=False):
        return dropout(input, p, False, inplace)

    F.dropout = eval_dropout
    # PyTorch 1.13 has no ONNX symbolic for aten::zero, which Swin-v2 applies to a slice of its qkv
    # bias (qkv_bias[length:2 * length].zero_()): give it one (x * 0, folded with the constant bias).
    torch.onnx.register_custom_op_symbolic(
        "aten::zero", lambda g, x: g.op("Mul", x, g.op("Constant", value_t=torch.tensor(0.0))), opset)
    # Opsets above what this torch exports are reached with onnx's version converter (cases.py).
    export_opset = min(opset, case_table.TORCH_MAX_OPSET)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, example, path, opset_version=export_opset, input_names=input_names,
                              output_names=output_names, dynamic_axes=dynamic_axes,
                              training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=True)
    finally:
        F.dropout = dropout
    if opset > export_opset:
        import onnx
        from onnx import version_converter
        converted = version_converter.convert_version(onnx.load(path), opset)
        onnx.checker.check_model(converted)
        onnx.save(converted, path)


def ort_run(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def onnx_summary(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    ops = {}
    for n in m.graph.node:
        key = n.op_type if not n.domain else f"{n.domain}::{n.op_type}"
        ops[key] = ops.get(key, 0) + 1
    return {"nodes": len(m.graph.node), "op_types": dict(sorted(ops.items())),
            "initializers": len(m.graph.initializer)}


def make_unsupported(name, out_dir):
    import onnx
    from onnx import TensorProto, helper
    if name == "unsupported_det":
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
        nodes = [helper.make_node("Relu", ["x"], ["r"], name="pre_relu"),
                 helper.make_node("Det", ["r"], ["y"], name="det_node_7")]
        opsets = [helper.make_opsetid("", 17)]
        expect = {"op_type": "Det", "node": "det_node_7"}
    else:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
        nodes = [helper.make_node("Relu", ["x"], ["r"], name="pre_relu"),
                 helper.make_node("FancyOp", ["r"], ["y"], name="fancy_node_3", domain="com.example")]
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
        expect = {"op_type": "FancyOp", "node": "fancy_node_3"}
    graph = helper.make_graph(nodes, name, [x], [y])
    model = helper.make_model(graph, opset_imports=opsets, producer_name="ember-tests")
    model.ir_version = 8
    if name == "unsupported_det":
        onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
    return {"inputs": ["x"], "outputs": ["y"], "runs": [], "expect_error": expect}


def make_case(name, spec, seed, out_dir):
    import torch
    torch.set_num_threads(1)
    path = os.path.join(out_dir, "model.onnx")
    meta = {"case": name, "kind": spec["kind"], "model": spec["model"], "opset": spec["opset"],
            "seed": seed, "timings_s": {}}
    t0 = time.time()

    if spec["kind"] == "unsupported":
        meta.update(make_unsupported(spec["model"], out_dir))
        meta["timings_s"]["make"] = time.time() - t0
        return meta

    g = torch.Generator().manual_seed(seed + 1)
    if spec["kind"] in ("tv", "tv_batch"):
        model = build_tv(spec).eval()
        shape = tuple(spec["shape"])
        meta["randomized"] = randomize(model, seed, calib_shape=shape)
        in_names, out_names = ["input"], ["logits"]
        if spec["kind"] == "tv":
            example = torch.randn(shape, generator=g)
            runs = [("", {"input": example})]
            dynamic, input_shape = None, None
        else:
            example = torch.randn((2,) + shape[1:], generator=g)
            runs = [(f"_b{b}", {"input": torch.randn((b,) + shape[1:], generator=g)})
                    for b in case_table.BATCHES]
            dynamic = {"input": {0: "batch"}, "logits": {0: "batch"}}
            input_shape = ["input=batch:1..%dx%s" % (case_table.BATCH_MAX,
                                                     "x".join(str(d) for d in shape[1:]))]
    elif spec["kind"] == "bert":
        model = BertEncoder.make().eval()
        meta["randomized"] = randomize(model, seed)
        in_names, out_names = ["input_ids"], ["hidden"]
        seq = case_table.BERT_SEQ
        example = BertEncoder.ids(2, seq, g)
        runs = [(f"_b{b}", {"input_ids": BertEncoder.ids(b, seq, g)}) for b in case_table.BERT_BATCHES]
        dynamic = {"input_ids": {0: "batch"}, "hidden": {0: "batch"}}
        input_shape = ["input_ids=batch:1..%dx%d" % (case_table.BERT_MAX[0], seq)]
    elif spec["kind"] == "bert_dynseq":
        model = BertEncoder.make().eval()
        meta["randomized"] = randomize(model, seed)
        in_names, out_names = ["input_ids"], ["hidden"]
        example = BertEncoder.ids(2, 12, g)
        runs = [(f"_b{b}s{s}", {"input_ids": BertEncoder.ids(b, s, g)})
                for b, s in case_table.BERT_DYNSEQ_RUNS]
        dynamic = {"input_ids": {0: "batch", 1: "seq"}, "hidden": {0: "batch", 1: "seq"}}
        input_shape = ["input_ids=batch:1..%dxseq:1..%d" % case_table.BERT_MAX]
    else:
        raise ValueError(f"unknown kind {spec['kind']}")
    meta["timings_s"]["build"] = time.time() - t0

    t = time.time()
    torch_export(model, example if isinstance(example, tuple) else (example,), path, spec["opset"],
                 in_names, out_names, dynamic)
    meta["timings_s"]["torch_export"] = time.time() - t
    meta["onnx"] = onnx_summary(path)
    meta["onnx"]["bytes"] = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))

    meta.update({"inputs": in_names, "outputs": out_names, "runs": []})
    if input_shape:
        meta["input_shape"] = input_shape
    t_torch = t_ort = 0.0
    for suffix, feeds in runs:
        run = {"label": suffix.lstrip("_") or "static", "inputs": {}, "torch": {}, "ort": {}}
        np_feeds = {k: v.numpy() for k, v in feeds.items()}
        for k, v in np_feeds.items():
            f = f"{'input' if len(np_feeds) == 1 else k}{suffix}.npy"
            np.save(os.path.join(out_dir, f), v)
            run["inputs"][k] = f
            run.setdefault("shapes", {})[k] = list(v.shape)
        t = time.time()
        with torch.no_grad():
            res = model(*[feeds[k] for k in in_names])
        res = res if isinstance(res, (tuple, list)) else (res,)
        t_torch += time.time() - t
        t = time.time()
        ort_out = ort_run(path, np_feeds)
        t_ort += time.time() - t
        run["torch_vs_ort"] = {}
        for o, tv in zip(out_names, res):
            tv = tv.numpy()
            tf = f"torch_{'output' if len(out_names) == 1 else o}{suffix}.npy"
            of = f"ort_{'output' if len(out_names) == 1 else o}{suffix}.npy"
            np.save(os.path.join(out_dir, tf), tv)
            np.save(os.path.join(out_dir, of), ort_out[o])
            run["torch"][o], run["ort"][o] = tf, of
            err = rel_l2(ort_out[o], tv)
            run["torch_vs_ort"][o] = err
            run.setdefault("output_stats", {})[o] = {
                "shape": list(tv.shape), "std": float(tv.std()), "max_abs": float(np.abs(tv).max())}
            if not np.isfinite(tv).all():
                raise RuntimeError(f"{name}: PyTorch output {o} is not finite")
            if err > REF_TOLERANCE:
                raise RuntimeError(f"{name}: PyTorch and onnxruntime disagree on {o}{suffix}: "
                                   f"relative L2 {err:.3g} > {REF_TOLERANCE}")
        meta["runs"].append(run)
    meta["timings_s"]["torch_run"] = t_torch
    meta["timings_s"]["ort"] = t_ort
    # Conditioning: the same model and inputs in f64 (in place; the f32 results are saved).
    t = time.time()
    with torch.no_grad():
        model.double()
        for (suffix, feeds), run in zip(runs, meta["runs"]):
            res = model(*[v.double() if v.is_floating_point() else v
                          for v in (feeds[k] for k in in_names)])
            res = res if isinstance(res, (tuple, list)) else (res,)
            run["torch_f32_vs_f64"] = {}
            for o, r64 in zip(out_names, res):
                err = rel_l2(np.load(os.path.join(out_dir, run["torch"][o])), r64.numpy())
                run["torch_f32_vs_f64"][o] = err
                if err > F64_TOLERANCE:
                    raise RuntimeError(f"{name}: PyTorch's f32 {o}{suffix} is {err:.3g} from f64 "
                                       f"(> {F64_TOLERANCE}): too ill-conditioned to compare at 1e-4")
    meta["timings_s"]["torch_f64"] = time.time() - t
    meta["timings_s"]["make"] = time.time() - t0
    return meta


def ensure_case(name, cache, seed=DEFAULT_SEED, force=False, quiet=False):
    """Returns (case folder, meta); makes the case unless it is cached with the same stamp."""
    specs = case_table.cases()
    if name not in specs:
        raise KeyError(f"unknown case {name!r}; see tests/onnx/cases.py")
    spec = specs[name]
    vers = versions()
    st = stamp(name, spec, seed, vers)
    case_dir = os.path.join(cache, name)
    meta_path = os.path.join(case_dir, "meta.json")
    if not force and os.path.exists(meta_path):
        try:
            with open(meta_path) as fh:
                meta = json.load(fh)
            if meta.get("stamp") == st:
                if not quiet:
                    print(f"make_models: {name}: cached")
                meta["cached"] = True
                return case_dir, meta
        except (OSError, ValueError):
            pass
    os.makedirs(cache, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}.", dir=cache)
    try:
        # Per-model seed, the same for every opset of a model.
        model_seed = seed + zlib.crc32(spec["model"].encode()) % 100000
        meta = make_case(name, spec, model_seed, tmp)
        meta["versions"] = vers
        meta["stamp"] = st
        with open(os.path.join(tmp, "meta.json"), "w") as fh:
            json.dump(meta, fh, indent=1, sort_keys=True)
        if os.path.exists(case_dir):
            shutil.rmtree(case_dir)
        os.rename(tmp, case_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not quiet:
        t = meta["timings_s"]
        print(f"make_models: {name}: made in {t['make']:.1f} s "
              f"(torch export {t.get('torch_export', 0):.1f} s, ort {t.get('ort', 0):.1f} s)")
    meta["cached"] = False
    return case_dir, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", required=True, help="cache folder (the build tree's onnx-cache)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--force", action="store_true", help="remake even when cached")
    ap.add_argument("--all", action="store_true", help="every case in cases.py")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args()
    names = list(case_table.cases()) if args.all else args.cases
    if not names:
        ap.error("name a case or pass --all")
    failed = 0
    for n in names:
        try:
            ensure_case(n, args.cache, args.seed, args.force)
        except Exception as e:  # report and go on with the next case
            failed += 1
            print(f"make_models: {n}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
