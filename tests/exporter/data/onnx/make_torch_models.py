#!/usr/bin/env python3
"""Exports tiny PyTorch models with torch.onnx.export (TorchScript path) for the exporter's ONNX tests.

Usage: make_torch_models.py OUT_DIR
Writes, for each model M and opset N: M_opsetN.onnx, plus M_input.bin / M_output.bin (raw float32,
little-endian) and M_shape.txt (input dims, space-separated). Exits 77 when torch or onnx is missing.
Deterministic: fixed seed, eval mode, random (not pretrained) weights.
"""
import os
import sys

try:
    import torch
    import torch.nn as nn
except ImportError:
    sys.exit(77)


class TinyCnn(nn.Module):
    """Conv+BN+ReLU, max pool, a residual block, a strided conv, GAP, x.view(x.size(0), -1), Linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                   nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8))
        self.down = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = torch.relu(x + self.block(x))
        x = self.gap(self.down(x))
        x = x.view(x.size(0), -1)
        return self.fc(self.drop(x))


class TinyAttention(nn.Module):
    """One self-attention block with symbolic batch and sequence: reshape(B, S, H, D) from x.size(),
    LayerNorm (LayerNormalization at opset 17, ReduceMean/Pow/Sqrt before) and GELU (Erf)."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.h, self.d = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))

    def forward(self, x):
        b, s, c = x.size()
        q, k, v = self.qkv(x).split(c, dim=-1)
        q = q.reshape(b, s, self.h, self.d).transpose(1, 2)
        k = k.reshape(b, s, self.h, self.d).transpose(1, 2)
        v = v.reshape(b, s, self.h, self.d).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / (self.d ** 0.5), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, c)
        x = self.norm(x + self.out(y))
        return x + self.ff(x)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    models = {
        "tiny_cnn": (TinyCnn(), torch.randn(2, 3, 16, 16), {"input": {0: "batch"}}),
        "tiny_attention": (TinyAttention(), torch.randn(2, 5, 16), {"input": {0: "batch", 1: "seq"}}),
    }
    for name, (model, x, axes) in models.items():
        # Non-trivial BN statistics.
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.5, 0.5)
        model.eval()
        with torch.no_grad():
            y = model(x)
        x.numpy().astype("<f4").tofile(os.path.join(out, name + "_input.bin"))
        y.numpy().astype("<f4").tofile(os.path.join(out, name + "_output.bin"))
        with open(os.path.join(out, name + "_shape.txt"), "w") as f:
            f.write(" ".join(str(d) for d in x.shape) + "\n")
        for opset in (13, 17):
            torch.onnx.export(model, (x,), os.path.join(out, f"{name}_opset{opset}.onnx"), opset_version=opset,
                              input_names=["input"], output_names=["output"], dynamic_axes=axes,
                              training=(torch.onnx.TrainingMode.PRESERVE if opset == 13 else torch.onnx.TrainingMode.EVAL),
                              # opset 13: PRESERVE skips torch's eval peephole, so BatchNormalization nodes stay (Ember
                              # folds them); opset 17: torch folds BN and constants itself.
                              do_constant_folding=(opset != 13))
    return 0


if __name__ == "__main__":
    sys.exit(main())
