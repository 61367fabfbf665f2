#!/usr/bin/env python3
"""ONNX files from PyTorch 2's exporters, checked in as test data (tests/data/onnx_torch2/).

Debian 12's torch 1.13 has only the TorchScript exporter and stops at opset 17, so the files that a
current PyTorch writes (the dynamo-based `torch.onnx.export(..., dynamo=True)` at opsets 18-21, and
the TorchScript-based one at 18-20) are made once on a machine with PyTorch >= 2.5 and onnxscript and
checked in with their inputs and PyTorch's outputs. The models are small (tens of KB of weights)
and cover the op families of the torchvision and encoder cases: conv/BN/ReLU/Hardswish/SiLU,
depthwise conv, squeeze-excitation, pooling, residual adds, Linear; embeddings, LayerNorm, erf and
tanh GELU, multi-head attention with batched MatMul, Softmax and a padding mask.

    python3 tests/onnx/make_torch2_models.py OUT_DIR

Writes OUT_DIR/<name>/{model.onnx, input.npy, torch_output.npy, meta.json} and prints a table.
Every parameter and BatchNorm buffer is randomized from a fixed seed (so BN folding really runs).
tests/onnx/run_torch2_files.py runs them through Ember and compares with the checked-in PyTorch
outputs and with onnxruntime.
"""
import json
import os
import sys
import traceback

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 20261122


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
            elif "norm" in name or "bn" in name or "ln" in name:
                p.copy_(torch.rand(p.shape, generator=g) * 0.5 + (0.25 if name.endswith("weight") else -0.25))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=g) * 0.1)
            elif name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=g) + 0.5)
    return model.eval()


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False)
        self.bn0 = nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.se_reduce = nn.Conv2d(16, 8, 1)
        self.se_expand = nn.Conv2d(8, 16, 1)
        self.pw = nn.Conv2d(16, 24, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(24)
        self.conv = nn.Conv2d(24, 24, 3, padding=1)
        self.fc = nn.Linear(24, 10)

    def forward(self, x):
        x = F.relu(self.bn0(self.stem(x)))
        x = F.max_pool2d(x, 3, stride=2, padding=1)
        y = F.hardswish(self.bn1(self.dw(x)))
        s = F.adaptive_avg_pool2d(y, 1)
        s = F.hardsigmoid(self.se_expand(F.relu(self.se_reduce(s))))
        x = x + y * s
        x = F.silu(self.bn2(self.pw(x)))
        x = x + F.avg_pool2d(self.conv(x), 3, stride=1, padding=1)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class TinyEncoder(nn.Module):
    VOCAB, HIDDEN, HEADS, FFN, MAX_POS = 100, 32, 4, 64, 16

    def __init__(self):
        super().__init__()
        h = self.HIDDEN
        self.tok = nn.Embedding(self.VOCAB, h)
        self.pos = nn.Embedding(self.MAX_POS, h)
        self.register_buffer("position_ids", torch.arange(self.MAX_POS).unsqueeze(0), persistent=False)
        self.ln_emb = nn.LayerNorm(h)
        self.qkv = nn.ModuleList([nn.Linear(h, 3 * h) for _ in range(2)])
        self.out = nn.ModuleList([nn.Linear(h, h) for _ in range(2)])
        self.ln1 = nn.ModuleList([nn.LayerNorm(h) for _ in range(2)])
        self.ff1 = nn.ModuleList([nn.Linear(h, self.FFN) for _ in range(2)])
        self.ff2 = nn.ModuleList([nn.Linear(self.FFN, h) for _ in range(2)])
        self.ln2 = nn.ModuleList([nn.LayerNorm(h) for _ in range(2)])

    def forward(self, input_ids):
        b, s = input_ids.shape
        x = self.tok(input_ids) + self.pos(self.position_ids[:, :s])
        x = self.ln_emb(x)
        pad = (input_ids == 0).unsqueeze(1).unsqueeze(2)            # [b, 1, 1, s]
        d = self.HIDDEN // self.HEADS
        for i in range(2):
            q, k, v = self.qkv[i](x).split(self.HIDDEN, dim=-1)
            q, k, v = (t.reshape(b, s, self.HEADS, d).transpose(1, 2) for t in (q, k, v))
            att = torch.matmul(q, k.transpose(-1, -2)) / d ** 0.5
            att = att.masked_fill(pad, -1e4).softmax(-1)
            a = torch.matmul(att, v).transpose(1, 2).reshape(b, s, self.HIDDEN)
            x = self.ln1[i](x + self.out[i](a))
            f = F.gelu(self.ff1[i](x), approximate="none" if i == 0 else "tanh")
            x = self.ln2[i](x + self.ff2[i](f))
        return x


def inputs(kind, g):
    if kind == "cnn":
        return torch.randn(1, 3, 32, 32, generator=g)
    ids = torch.randint(1, TinyEncoder.VOCAB, (2, 12), generator=g)
    ids[1, 9:] = 0   # padding in the second sequence
    return ids


# (name, model kind, exporter, opset)
CASES = [
    ("cnn_dynamo_opset18", "cnn", "dynamo", 18),
    ("cnn_dynamo_opset21", "cnn", "dynamo", 21),
    ("encoder_dynamo_opset18", "encoder", "dynamo", 18),
    ("encoder_dynamo_opset21", "encoder", "dynamo", 21),
    ("cnn_torchscript_opset20", "cnn", "torchscript", 20),
    ("encoder_torchscript_opset20", "encoder", "torchscript", 20),
]


def export(model, x, path, exporter, opset):
    kwargs = dict(input_names=["input"], output_names=["output"], opset_version=opset)
    if exporter == "dynamo":
        prog = torch.onnx.export(model, (x,), dynamo=True, external_data=False, **kwargs)
        prog.save(path)
    else:
        torch.onnx.export(model, (x,), path, dynamo=False, do_constant_folding=True,
                          training=torch.onnx.TrainingMode.PRESERVE, **kwargs)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "onnx_torch2"
    rows = []
    for i, (name, kind, exporter, opset) in enumerate(CASES):
        torch.manual_seed(SEED)
        model = randomize(SmallCNN() if kind == "cnn" else TinyEncoder(), SEED + i)
        x = inputs(kind, torch.Generator().manual_seed(SEED + 100 + i))
        case = os.path.join(out_dir, name)
        os.makedirs(case, exist_ok=True)
        path = os.path.join(case, "model.onnx")
        try:
            with torch.no_grad():
                ref = model(x)
            export(model, x, path, exporter, opset)
            import onnx
            m = onnx.load(path)
            onnx.checker.check_model(m)
            ops = sorted({n.op_type for n in m.graph.node})
            got_opset = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0]
            import onnxruntime as ort
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            ort_out = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
            err = float(np.linalg.norm(ort_out - ref.numpy()) / np.linalg.norm(ref.numpy()))
            np.save(os.path.join(case, "input.npy"), x.numpy())
            np.save(os.path.join(case, "torch_output.npy"), ref.numpy())
            meta = {"case": name, "exporter": exporter, "opset": got_opset, "seed": SEED + i,
                    "torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": ort.__version__,
                    "ops": ops, "ort_vs_torch_rel_l2": err,
                    "input_name": sess.get_inputs()[0].name, "output_name": sess.get_outputs()[0].name}
            with open(os.path.join(case, "meta.json"), "w") as f:
                json.dump(meta, f, indent=1, sort_keys=True)
            rows.append(f"{name:32s} ok  opset {got_opset}  {os.path.getsize(path):7d} B  ort-vs-torch {err:.2e}  "
                        f"ops {' '.join(ops)}")
        except Exception as e:  # report and go on: the table says which exporter paths work
            traceback.print_exc()
            rows.append(f"{name:32s} FAILED {type(e).__name__}: {str(e)[:200]}")
    print("torch", torch.__version__)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
