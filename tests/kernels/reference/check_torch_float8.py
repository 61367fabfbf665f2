#!/usr/bin/env python3
"""Cross-checks the FP8 golden data (tests/data/quant/, made with ml_dtypes) against PyTorch's float8
dtypes: a second, independent reference for the e4m3fn and e5m2 codecs.

  python3 tests/kernels/reference/check_torch_float8.py      # needs torch >= 2.1 (float8 dtypes)

Debian 12's torch 1.13 has no float8 dtypes, so this runs where a newer PyTorch is (the lent GPU
machine, CPU tensors); the result is recorded in the quantization notes. Checks, per format: all 256
codes decode like torch; every f16 and bf16 value, clamped to ±max finite first (torch does not
saturate either; e5m2 keeps ±Inf), encodes like torch; every tie point (tests/data/quant/ties_*)
encodes like torch; NaN inputs give NaN (torch's NaN sign is not compared). Exit 0 when all match.
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "data", "quant"))
FORMATS = {"e4m3fn": (torch.float8_e4m3fn, 448.0, False), "e5m2": (torch.float8_e5m2, 57344.0, True)}


def expand_runs(runs, n=65536):
    out = np.empty(n, dtype=np.uint8)
    starts = list(runs[:, 0]) + [n]
    for i in range(len(runs)):
        out[starts[i]:starts[i + 1]] = runs[i, 1]
    return out


def torch_encode(x, dtype, vmax, keeps_inf):
    t = torch.from_numpy(np.asarray(x, dtype=np.float32).copy())
    finite = torch.isfinite(t)
    clamped = torch.where(finite, t.clamp(-vmax, vmax), t)
    if not keeps_inf:
        clamped = torch.where(torch.isinf(t), torch.sign(t) * vmax, clamped)
    return clamped.to(dtype).view(torch.uint8).numpy()


def sources(src):
    bits = np.arange(65536, dtype=np.uint32)
    if src == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float32)
    return (bits << 16).view(np.float32)


def compare(name, x, got, want, decode):
    nan_in = np.isnan(x)
    same = (got == want) | (nan_in & np.isnan(decode(got)) & np.isnan(decode(want)))
    bad = np.flatnonzero(~same)
    status = "ok" if bad.size == 0 else f"{bad.size} differ, first x={x[bad[0]]!r}: ours {want[bad[0]]:#04x} torch {got[bad[0]]:#04x}"
    print(f"  {name:28s} {x.size:6d} values  {status}")
    return bad.size == 0


def main():
    print("torch", torch.__version__)
    ok = True
    for fmt, (dtype, vmax, keeps_inf) in FORMATS.items():
        print(fmt)
        golden_decode = np.load(os.path.join(DATA, f"decode_{fmt}.npy"))
        codes = np.arange(256, dtype=np.uint8)
        torch_decode = torch.from_numpy(codes).view(dtype).float().numpy()
        same = (golden_decode.view(np.uint32) == torch_decode.view(np.uint32)) | (
            np.isnan(golden_decode) & np.isnan(torch_decode))
        print(f"  {'decode, all 256 codes':28s} {256:6d} values  {'ok' if same.all() else f'{(~same).sum()} differ'}")
        ok &= bool(same.all())

        def decode(c):
            return torch_decode[c]
        for src in ("f16", "bf16"):
            x = sources(src)
            want = expand_runs(np.load(os.path.join(DATA, f"encode_{src}_{fmt}.runs.npy")))
            ok &= compare(f"encode, every {src} value", x, torch_encode(x, dtype, vmax, keeps_inf), want, decode)
        ties_in = np.load(os.path.join(DATA, f"ties_{fmt}.in.npy"))
        ties_out = np.load(os.path.join(DATA, f"ties_{fmt}.out.npy"))
        ok &= compare("encode, tie points", ties_in, torch_encode(ties_in, dtype, vmax, keeps_inf), ties_out, decode)
    print("PASS: the golden FP8 data equals PyTorch's float8 conversions" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
