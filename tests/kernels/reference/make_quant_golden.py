#!/usr/bin/env python3
"""Golden data for the narrow float codecs (runtime/core/float_codecs.h) and the reference block
quantizers (kernels/reference/quantize.h), from references independent of the C++ code.

Run from the repository root with the project venv (numpy 1.24.2 + ml_dtypes, requirements.txt):

    .venv/bin/python tests/kernels/reference/make_quant_golden.py

It rewrites tests/data/quant/ (identical bytes on every run: fixed seeds, no timestamps).

Element casts use ml_dtypes, which rounds to nearest even but does not saturate, so every value is
clamped to the format's range first (docs/DESIGN.md §4). Where it leaves a case open, the choice is
written out below and matches the header comment of float_codecs.h:
  - e2m1 has no NaN: NaN encodes to +0 (0x0).
  - ue4m3 is e4m3 without a sign: inputs are clamped to [0, 448] (negatives, -0, -Inf give 0x00);
    NaN gives 0x7F, the invalid code; decoding 0x7F or a code with the sign bit set gives NaN.
  - e8m0 is computed here from its definition (nearest power of two in [2^-127, 2^127], ties
    1.5*2^k up; zero, negatives and values below 2^-127 give 0x00; +Inf and values above 2^127 give
    0xFE; NaN gives 0xFF), in float64, and checked against ml_dtypes where ml_dtypes' own rules
    agree: ml_dtypes maps zero, negatives and overflow to NaN, and sends f32 subnormals in
    (2^-127, 1.5*2^-127) up to 2^-126.

Files (all little-endian .npy):
  decode_<fmt>.npy            f32 [256] ([16] for e2m1): the value of every code; NaN is the quiet
                              NaN with the code's sign (ue4m3's invalid codes: +NaN).
  encode_<src>_<fmt>.runs.npy i32 [R, 2]: every one of the 65,536 f16 / bf16 bit patterns encoded
                              to <fmt>, run-length coded: row (first, code) says that source bit
                              patterns first .. (next row's first - 1) encode to `code`.
  ties_<fmt>.in.npy / .out.npy f32 [T] / u8 [T]: every midpoint between neighbouring codes (both
                              signs), the f32 on either side of it, and special values (zeros,
                              Inf, NaNs, the range limits, f32 subnormals).
  manifest.txt, <case>.*.npy  block quantizer cases (below).

Block quantizers: a weight w [N, K], row-major, blocks along K. For every case:
  <case>.w.npy      f32 [N, K]   input
  <case>.codes.npy  u8 [N, K] (fp8, mxfp8) or [N, K/2] (nvfp4: element 2i in the low nibble)
  <case>.scales.npy fp8: f32 [ceil(N/block_n), ceil(K/block_k)]; mxfp8: u8 e8m0 [N, K/32];
                    nvfp4: u8 ue4m3 [N, K/16]
  <case>.global.npy nvfp4 only: f32 [1], the per-tensor decode scale g
  <case>.dq.npy     f32 [N, K]   dequantized codes
manifest.txt: one case per line: name=<case> scheme=fp8|mxfp8|nvfp4 n=<N> k=<K>
[block_n=<bn> block_k=<bk>] (fp8 only).

The schemes (numpy below, written from the format definitions; all arithmetic in float32):
  fp8:   per block, scale = amax / 448 (scale 1 where that is 0: amax = 0, or amax so small the
         quotient underflows); code = e4m3fn(x / scale); dequant = f32(code) * scale.
  mxfp8: torchao's RCEIL path (mx_tensor.py, _to_mx_rceil at pytorch/ao 050515e8a09c): per 32
         along K, descale = amax * f32(1/448); e = e8m0 code of the smallest power of two >=
         descale (0 when descale <= 2^-127); data = e4m3fn(x * 2^(127 - e)); dequant = f32(code) *
         2^(e - 127).
  nvfp4: torchao >= 0.18 nvfp4_quantize, two-level: g = amax / 2688 (g = 1 when amax = 0; g is
         raised to 2^-121 when smaller, so that 1/g / s8 stays finite); per 16 along K,
         s = (amax_block / 6) / g clamped to [2^-6, 448], s8 = e4m3(s), recip = (1 / g) / f32(s8),
         code = e2m1(clamp(x * recip, -6, 6)); dequant = e2m1 * f32(g * f32(s8)).
"""

import math
import os

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "data", "quant"))

F32 = np.float32
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2
E2M1 = ml_dtypes.float4_e2m1fn
E8M0 = ml_dtypes.float8_e8m0fnu

QUIET_NAN_BITS = 0x7FC00000


def save(name, array):
    np.save(os.path.join(OUT_DIR, name), array, allow_pickle=False)


def bits_to_f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(F32)


# ---- element encoders: f32 array -> uint8 codes --------------------------------------------------

def enc_e4m3fn(x):
    x = np.asarray(x, dtype=F32)
    with np.errstate(invalid="ignore"):
        return np.clip(x, F32(-448), F32(448)).astype(E4M3).view(np.uint8)


def enc_e5m2(x):
    x = np.asarray(x, dtype=F32)
    y = np.where(np.isinf(x), x, np.clip(x, F32(-57344), F32(57344))).astype(F32)
    with np.errstate(invalid="ignore", over="ignore"):
        return y.astype(E5M2).view(np.uint8)


def enc_e2m1(x):
    x = np.asarray(x, dtype=F32)
    with np.errstate(invalid="ignore"):
        codes = np.clip(x, F32(-6), F32(6)).astype(E2M1).view(np.uint8).copy()
    codes[np.isnan(x)] = 0x0
    return codes


def enc_ue4m3(x):
    x = np.asarray(x, dtype=F32)
    with np.errstate(invalid="ignore"):
        y = np.where(x > 0, np.minimum(x, F32(448)), F32(0)).astype(F32)
        codes = y.astype(E4M3).view(np.uint8).copy()
    codes[np.isnan(x)] = 0x7F
    return codes


def enc_e8m0(x):
    """Nearest power of two in [2^-127, 2^127], ties up, from the definition (float64, exact)."""
    with np.errstate(invalid="ignore"):  # signalling NaNs
        v = np.asarray(x, dtype=F32).astype(np.float64)
    codes = np.zeros(v.shape, dtype=np.uint8)
    nan = np.isnan(v)
    pos = (v > 0) & ~nan
    c = np.clip(np.where(pos, v, 1.0), 2.0**-127, 2.0**127)
    mant, exp = np.frexp(c)  # c = mant * 2^exp, mant in [0.5, 1): between 2^(exp-1) and 2^exp
    code = (exp - 1 + 127) + (mant >= 0.75)  # 0.75 * 2^exp = 1.5 * 2^(exp-1): the tie, rounds up
    codes[pos] = np.minimum(code, 254)[pos]
    codes[nan] = 0xFF
    return codes


def check_e8m0_against_ml_dtypes(x):
    """Where ml_dtypes' e8m0 rules are ours (normal f32 in [2^-126, 2^127]), the codes agree."""
    x = np.asarray(x, dtype=F32)
    ok = (x >= F32(2.0**-126)) & (x <= F32(2.0**127))
    ours = enc_e8m0(x[ok])
    theirs = x[ok].astype(E8M0).view(np.uint8)
    assert np.array_equal(ours, theirs), "e8m0 reference disagrees with ml_dtypes"


ENCODERS = {"e4m3fn": enc_e4m3fn, "e5m2": enc_e5m2, "e2m1": enc_e2m1, "e8m0": enc_e8m0,
            "ue4m3": enc_ue4m3}


# ---- decode tables ------------------------------------------------------------------------------

def decode_table(fmt):
    if fmt == "e2m1":
        return np.arange(16, dtype=np.uint8).view(E2M1).astype(F32)
    codes = np.arange(256, dtype=np.uint8)
    if fmt == "ue4m3":
        values = codes.view(E4M3).astype(F32)
        values[codes >= 0x7F] = bits_to_f32(QUIET_NAN_BITS)
        return values
    dtype = {"e4m3fn": E4M3, "e5m2": E5M2, "e8m0": E8M0}[fmt]
    return codes.view(dtype).astype(F32)


def dec(fmt, codes):
    return decode_table(fmt)[np.asarray(codes, dtype=np.uint8)]


# ---- exhaustive f16 / bf16 sources, run-length coded ----------------------------------------------

def all_sources(src):
    bits = np.arange(65536, dtype=np.uint32)
    if src == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(F32)  # exact, payloads kept
    return (bits << 16).view(F32)  # bf16 is the top half of an f32


def run_length(codes):
    starts = np.concatenate(([0], np.nonzero(np.diff(codes.astype(np.int32)) != 0)[0] + 1))
    return np.stack([starts, codes[starts].astype(np.int32)], axis=1).astype(np.int32)


# ---- tie points ---------------------------------------------------------------------------------

def f32_next(x, direction):
    return np.nextafter(F32(x), F32(direction), dtype=F32)


SPECIAL_BITS = [
    0x00000000, 0x80000000,            # +-0
    0x7F800000, 0xFF800000,            # +-Inf
    0x7FC00000, 0xFFC00000,            # quiet NaNs
    0x7F800001, 0xFFBFFFFF, 0x7FFFFFFF,  # signalling NaN, NaNs with payloads
    0x00000001, 0x80000001,            # smallest f32 subnormal
    0x003FFFFF, 0x00400000, 0x00400001,  # around 2^-127 (f32 subnormal)
    0x005FFFFF, 0x00600000, 0x00600001,  # around 1.5 * 2^-127
    0x007FFFFF, 0x00800000,            # largest subnormal, smallest normal
    0x7F7FFFFF, 0xFF7FFFFF,            # f32 max
    0x7F000000, 0x7F400000, 0x7F3FFFFF,  # 2^127, 1.5 * 2^127 and just below
]


def tie_inputs(fmt):
    values = decode_table(fmt).astype(np.float64)
    finite = np.unique(np.abs(values[np.isfinite(values)]))  # sorted magnitudes, 0 included
    inputs = []
    for a, b in zip(finite[:-1], finite[1:]):
        mid = (a + b) / 2
        assert float(F32(mid)) == mid, (fmt, a, b)
        for v in (mid, f32_next(mid, -np.inf), f32_next(mid, np.inf)):
            inputs += [F32(v), -F32(v)]
    top = finite[-1]
    # The tie just past the largest finite value (it would round to the next binade), the values
    # on either side, and the largest finite value itself.
    step = top - finite[-2]
    over = top + step / 2
    f32_max = float(np.finfo(F32).max)
    for v in (top, f32_next(top, np.inf), over, f32_next(over, -np.inf), f32_next(over, np.inf),
              min(2 * top, f32_max), 1e30):
        inputs += [F32(v), -F32(v)]
    inputs = np.array(inputs, dtype=F32)
    return np.concatenate([inputs, bits_to_f32(SPECIAL_BITS)])


# ---- block quantizers (numpy, float32 arithmetic) ------------------------------------------------

def ceil_div(a, b):
    return -(-a // b)


def quantize_fp8(w, block_n, block_k):
    n, k = w.shape
    scales = np.zeros((ceil_div(n, block_n), ceil_div(k, block_k)), dtype=F32)
    codes = np.zeros((n, k), dtype=np.uint8)
    dq = np.zeros((n, k), dtype=F32)
    for bi in range(scales.shape[0]):
        for bj in range(scales.shape[1]):
            rows = slice(bi * block_n, min(n, (bi + 1) * block_n))
            cols = slice(bj * block_k, min(k, (bj + 1) * block_k))
            block = w[rows, cols]
            amax = np.max(np.abs(block)) if block.size else F32(0)
            scale = F32(amax) / F32(448)
            if scale == 0:
                scale = F32(1)
            scales[bi, bj] = scale
            c = enc_e4m3fn(block / scale)
            codes[rows, cols] = c
            dq[rows, cols] = dec("e4m3fn", c) * scale
    return codes, scales, dq


def rceil_reference(v):
    """e8m0 code of the smallest power of two >= v (v >= 0, finite), clamped to [0, 254]."""
    v = float(v)
    if v <= 2.0**-127:
        return 0
    mant, exp = math.frexp(v)  # v = mant * 2^exp, mant in [0.5, 1)
    code = (exp - 1 + 127) if mant == 0.5 else (exp + 127)
    return min(code, 254)


def quantize_mxfp8(w):
    n, k = w.shape
    assert k % 32 == 0
    inv_448 = F32(1.0 / 448.0)
    codes = np.zeros((n, k), dtype=np.uint8)
    scales = np.zeros((n, k // 32), dtype=np.uint8)
    dq = np.zeros((n, k), dtype=F32)
    for i in range(n):
        for b in range(k // 32):
            cols = slice(32 * b, 32 * b + 32)
            block = w[i, cols]
            descale = F32(np.max(np.abs(block)) * inv_448)
            e = rceil_reference(descale)
            scales[i, b] = e
            c = enc_e4m3fn(block * F32(2.0 ** (127 - e)))
            codes[i, cols] = c
            with np.errstate(over="ignore"):  # f32 max rounds up to 256 * 2^120 = Inf
                dq[i, cols] = dec("e4m3fn", c) * F32(2.0 ** (e - 127))
    return codes, scales, dq


NVFP4_MIN_GLOBAL = F32(2.0**-121)


def nvfp4_global_scale(w):
    amax = F32(np.max(np.abs(w))) if w.size else F32(0)
    if amax == 0:
        return F32(1)
    g = F32(amax / F32(2688))
    return max(g, NVFP4_MIN_GLOBAL)


def quantize_nvfp4(w):
    n, k = w.shape
    assert k % 16 == 0
    g = nvfp4_global_scale(w)
    inv_g = F32(F32(1) / g)
    codes = np.zeros((n, k), dtype=np.uint8)
    scales = np.zeros((n, k // 16), dtype=np.uint8)
    dq = np.zeros((n, k), dtype=F32)
    for i in range(n):
        for b in range(k // 16):
            cols = slice(16 * b, 16 * b + 16)
            block = w[i, cols]
            block_scale = F32(np.max(np.abs(block)) / F32(6))
            s = F32(block_scale / g)
            s = min(max(s, F32(2.0**-6)), F32(448))
            s8 = enc_e4m3fn(np.array([s], dtype=F32))[0]
            s8_value = dec("e4m3fn", s8)
            recip = F32(inv_g / s8_value)
            c = enc_e2m1(np.clip(block * recip, F32(-6), F32(6)))
            scales[i, b] = s8
            codes[i, cols] = c
            dq[i, cols] = dec("e2m1", c) * F32(g * s8_value)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed, scales, g, dq


# ---- block quantizer inputs ---------------------------------------------------------------------

def random_weight(seed, n, k, spread=True):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k)).astype(F32)
    if spread:  # rows of very different magnitudes
        w *= (F32(2.0) ** rng.integers(-12, 12, size=(n, 1))).astype(F32)
    return w.astype(F32)


def e4m3_ties(count, seed):
    """Midpoints between neighbouring positive e4m3 values (RNE ties at scale 1), random signs."""
    values = np.unique(np.abs(decode_table("e4m3fn")[np.isfinite(decode_table("e4m3fn"))]))
    mids = ((values[:-1].astype(np.float64) + values[1:]) / 2).astype(F32)
    rng = np.random.default_rng(seed)
    picks = mids[rng.integers(0, mids.size, size=count)]
    return (picks * rng.choice(np.array([-1, 1], dtype=F32), size=count)).astype(F32)


def e2m1_ties():
    return np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=F32)


def mx_edge_weight():
    """One row per edge case, two MX blocks (K = 64) per row."""
    rows = []

    def row(first, second):
        rows.append(np.concatenate([np.asarray(first, F32), np.asarray(second, F32)]))

    def block(values, fill=0.0):
        b = np.full(32, fill, dtype=F32)
        b[: len(values)] = values
        return b

    rng = np.random.default_rng(7)
    zero = np.zeros(32, F32)
    row(zero, -zero)                                          # all-zero and all -0 blocks
    row(block([448.0] + list(e4m3_ties(31, 1))),              # descale exactly 1: RNE ties
        block([-448.0, 2.0**-10, 3 * 2.0**-10, -(2.0**-10), 464.0 / 2]))
    row(block([256.0, 1.0, -3.0]), block([512.0, 17.0, -33.0]))  # amax a power of two
    row(block([448.0 * 2.0**10, 1.0625 * 2.0**10, -17.0 * 2.0**10]),  # descale exactly 2^10
        block([448.0 * 2.0**-20, 1.0625 * 2.0**-20, 3.0 * 2.0**-20]))    # and 2^-20
    row(block([np.finfo(F32).max, -1e37, 3e38]), block([1e-45, -1e-45, 0.0]))  # huge, tiniest
    row(block([2.0**-120, 2.0**-121 * 3, -(2.0**-125)]),      # descale an f32 subnormal
        block([448.0 * 2.0**-126, 448.0 * 2.0**-127 * 1.5]))  # descale exactly 2^-126 and near
    row(rng.standard_normal(32).astype(F32) * F32(1e-3), rng.standard_normal(32).astype(F32) * F32(1e4))
    return np.stack(rows).astype(F32)


def nvfp4_edge_weight():
    """Rows of four NVFP4 blocks (K = 64); the tensor max is 2688, so g = 1 exactly."""
    rng = np.random.default_rng(11)

    def block(values, fill=0.0):
        b = np.full(16, fill, dtype=F32)
        b[: len(values)] = values
        return b

    ties = e2m1_ties()
    rows = [
        np.concatenate([block([2688.0]), np.zeros(16, F32), -np.zeros(16, F32), block([6.0, -6.0])]),
        np.concatenate([block([6.0] + list(ties) + list(-ties)),      # scale 1: e2m1 ties
                        block([12.0] + list(2 * ties)),               # scale 2
                        block([3.0, 1.5, 0.375, -0.125]),             # scale 0.5, amax a power of 2
                        block([4.0, 1.0, -2.0, 0.25])]),
        np.concatenate([block([1e-3, -5e-4]),                         # s clamps to 2^-6
                        block([0.09375 * 6, 0.05]),                   # s exactly 0.09375 (e4m3 point)
                        block([6.0 * 27 / 256, 6 * 0.0859375]),       # s = 27/256, an e4m3 tie
                        rng.standard_normal(16).astype(F32) * F32(100)]),
    ]
    return np.stack(rows).astype(F32)


def fp8_tie_weight():
    w = e4m3_ties(8 * 32, 3).reshape(8, 32)
    w[0, 0] = F32(448)  # amax 448: per-tensor scale exactly 1
    w[1, :6] = np.array([0, -0.0, 2.0**-10, -3 * 2.0**-10, 464 / 2, 7 * 2.0**-10], dtype=F32)
    return w


def ulp_neighbours(x, count):
    """x and the `count` f32 values on either side of it."""
    out = [F32(x)]
    lo = hi = F32(x)
    for _ in range(count):
        lo, hi = f32_next(lo, -np.inf), f32_next(hi, np.inf)
        out += [lo, hi]
    return out


def nvfp4_arithmetic_weight():
    """Blocks whose codes depend on the exact order of torchao >= 0.18's arithmetic: elements
    within a few ULP of an e2m1 tie after scaling, kept only where x * ((1 / g) / s8) gives a
    different code from x / (g * s8) (torchao <= 0.16) or from x * (1 / (g * s8)); block maxima
    (in every other block) kept only where (amax / 6) / g gives a different scale code from
    amax / (6 * g) or (amax / g) / 6. The tensor max, alone in the last row, makes g = 1.2345
    (rounded to f32), a value with a long mantissa."""
    rng = np.random.default_rng(13)
    tensor_max = F32(2688 * 1.2345)
    g = F32(tensor_max / F32(2688))
    inv_g = F32(F32(1) / g)
    ties = e2m1_ties()

    def s8_of(amax):
        s = min(max(F32(F32(amax / F32(6)) / g), F32(2.0**-6)), F32(448))
        return enc_e4m3fn(np.array([s], F32))[0]

    def s8_other(amax):
        a = min(max(F32(amax / F32(F32(6) * g)), F32(2.0**-6)), F32(448))
        b = min(max(F32(F32(amax / g) / F32(6)), F32(2.0**-6)), F32(448))
        return enc_e4m3fn(np.array([a, b], F32))

    # Block maxima that separate the scale arithmetic: within a few ULP of 6 * g * t, where t is
    # a midpoint between neighbouring e4m3 values (a tie of the scale's rounding).
    values = np.unique(np.abs(decode_table("e4m3fn")[np.isfinite(decode_table("e4m3fn"))]))
    mids = (values[:-1].astype(np.float64) + values[1:]) / 2
    maxima = []
    for t in mids[(mids > 2.0**-6) & (mids < 448)][::-1]:
        for candidate in ulp_neighbours(F32(t * 6 * float(g)), 4):
            if len(maxima) < 6 and candidate < tensor_max and \
                    np.any(s8_other(candidate) != s8_of(candidate)):
                maxima.append(F32(candidate))
    assert len(maxima) == 6, "no block maximum separates the NVFP4 scale arithmetic"

    rows = []
    for r in range(4):
        row = []
        for b in range(4):
            amax = maxima[(4 * r + b) % len(maxima)] if (r + b) % 2 else \
                F32(rng.uniform(0.1, 0.9) * float(tensor_max))
            s8v = dec("e4m3fn", s8_of(amax))
            recip = F32(inv_g / s8v)
            total = F32(g * s8v)
            recip_other = F32(F32(1) / total)
            picks = []
            for t in ties:
                for x in ulp_neighbours(F32(F32(t) * total), 3):
                    a = enc_e2m1(np.clip(np.array([x * recip], F32), -6, 6))[0]
                    b_ = enc_e2m1(np.clip(np.array([x / total], F32), -6, 6))[0]
                    c = enc_e2m1(np.clip(np.array([x * recip_other], F32), -6, 6))[0]
                    if a != b_ or a != c:
                        picks.append(F32(x) * (F32(-1) if len(picks) % 2 else F32(1)))
            block = np.zeros(16, F32)
            block[0] = amax
            picks = picks[:15]
            block[1:1 + len(picks)] = picks
            rest = 15 - len(picks)
            if rest:
                block[16 - rest:] = (rng.uniform(-0.8, 0.8, size=rest) * float(amax)).astype(F32)
            row.append(block)
        rows.append(np.concatenate(row))
    last = np.zeros(64, F32)
    last[5] = tensor_max  # a row of its own, so that no block above changes its maximum
    rows.append(last)
    w = np.stack(rows).astype(F32)
    assert np.max(np.abs(w)) == tensor_max
    return w


def fp8_division_weight():
    """A per-tensor FP8 case whose codes tell x / scale from x * (1 / scale): elements within a
    few ULP of e4m3 ties after scaling, kept where the two disagree."""
    amax = F32(448 * 1.1)
    scale = F32(amax / F32(448))
    inv = F32(F32(1) / scale)
    values = np.unique(np.abs(decode_table("e4m3fn")[np.isfinite(decode_table("e4m3fn"))]))
    mids = ((values[:-1].astype(np.float64) + values[1:]) / 2).astype(F32)
    picks = []
    for m in mids:
        for x in ulp_neighbours(F32(m * scale), 2):
            if enc_e4m3fn(np.array([x / scale], F32))[0] != enc_e4m3fn(np.array([x * inv], F32))[0]:
                picks.append(F32(x) * (F32(-1) if len(picks) % 3 == 1 else F32(1)))
    assert len(picks) >= 16, "too few FP8 elements separate division from the reciprocal"
    w = np.zeros((4, 32), F32)
    flat = np.array(picks[:127], dtype=F32)
    w.reshape(-1)[1:1 + flat.size] = flat
    w[0, 0] = amax
    return w


# ---- writing ------------------------------------------------------------------------------------

manifest = []


def write_case(name, scheme, w, block_n=None, block_k=None):
    n, k = w.shape
    save(f"{name}.w.npy", w.astype(F32))
    line = f"name={name} scheme={scheme} n={n} k={k}"
    if scheme == "fp8":
        codes, scales, dq = quantize_fp8(w, block_n, block_k)
        line += f" block_n={block_n} block_k={block_k}"
    elif scheme == "mxfp8":
        codes, scales, dq = quantize_mxfp8(w)
    else:
        codes, scales, g, dq = quantize_nvfp4(w)
        save(f"{name}.global.npy", np.array([g], dtype=F32))
    save(f"{name}.codes.npy", codes)
    save(f"{name}.scales.npy", scales)
    save(f"{name}.dq.npy", dq.astype(F32))
    manifest.append(line)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    for stale in os.listdir(OUT_DIR):
        if stale.endswith(".npy") or stale == "manifest.txt":
            os.remove(os.path.join(OUT_DIR, stale))

    for fmt, encode in ENCODERS.items():
        save(f"decode_{fmt}.npy", decode_table(fmt))
        for src in ("f16", "bf16"):
            x = all_sources(src)
            if fmt == "e8m0":
                check_e8m0_against_ml_dtypes(x)
            save(f"encode_{src}_{fmt}.runs.npy", run_length(encode(x)))
        ties = tie_inputs(fmt)
        if fmt == "e8m0":
            check_e8m0_against_ml_dtypes(ties)
        save(f"ties_{fmt}.in.npy", ties)
        save(f"ties_{fmt}.out.npy", encode(ties))

    # FP8 E4M3 with f32 decode scales: per tensor, per channel, 128x128 and small odd blocks.
    write_case("fp8_tensor_random", "fp8", random_weight(1, 16, 64), 16, 64)
    write_case("fp8_tensor_ties", "fp8", fp8_tie_weight(), 8, 32)
    write_case("fp8_tensor_division", "fp8", fp8_division_weight(), 4, 32)
    write_case("fp8_tensor_zero", "fp8", np.zeros((3, 5), F32), 3, 5)
    write_case("fp8_tensor_tiny", "fp8", np.array([[1e-44, -3e-45, 0], [1e-45, 0, -1e-44]], F32), 2, 3)
    write_case("fp8_tensor_subnormal", "fp8",
               np.array([[1e-40, -7e-41, 3e-42, 2.0**-140], [0, 1e-41, -1e-40, 5e-45]], F32), 2, 4)
    write_case("fp8_tensor_huge", "fp8",
               np.array([[np.finfo(F32).max, -1e38, 1.0, -2.5e37]], F32), 1, 4)
    channel = random_weight(2, 12, 48)
    channel[3] = 0  # an all-zero row
    channel[5, :] = -0.0
    channel[7, 10] = np.finfo(F32).max
    channel[9, :] = (channel[9, :] * F32(1e-41)).astype(F32)
    write_case("fp8_channel_random", "fp8", channel, 1, 48)
    w128 = random_weight(3, 130, 132)
    w128[:128, 128:] = 0  # a zero block (top right)
    write_case("fp8_block128_random", "fp8", w128, 128, 128)
    small = random_weight(4, 7, 11)
    small[0:3, 0:5] = fp8_tie_weight()[0:3, 0:5]
    small[0, 0] = F32(448)
    write_case("fp8_block3x5_edges", "fp8", small, 3, 5)

    # MXFP8 (E4M3 data, E8M0 scale per 32 along K, RCEIL).
    write_case("mxfp8_random", "mxfp8", random_weight(5, 8, 128))
    write_case("mxfp8_edges", "mxfp8", mx_edge_weight())

    # NVFP4 (E2M1 data, UE4M3 scale per 16 along K, f32 global scale).
    write_case("nvfp4_random", "nvfp4", random_weight(6, 8, 64))
    write_case("nvfp4_edges", "nvfp4", nvfp4_edge_weight())
    write_case("nvfp4_arithmetic", "nvfp4", nvfp4_arithmetic_weight())
    write_case("nvfp4_zero", "nvfp4", np.zeros((2, 32), F32))
    huge = random_weight(8, 2, 32, spread=False)
    huge[0, 3] = np.finfo(F32).max
    write_case("nvfp4_huge", "nvfp4", huge)
    write_case("nvfp4_tiny", "nvfp4", (random_weight(9, 2, 32, spread=False) * F32(1e-36)).astype(F32))
    write_case("nvfp4_subnormal", "nvfp4", (random_weight(10, 1, 32, spread=False) * F32(1e-44)).astype(F32))

    with open(os.path.join(OUT_DIR, "manifest.txt"), "w") as f:
        f.write("# Made by tests/kernels/reference/make_quant_golden.py; do not edit.\n")
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
