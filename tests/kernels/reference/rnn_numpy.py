"""ONNX LSTM and GRU (layout 0) in numpy float64, written from the ONNX operator spec.

Shared by make_golden.py (golden data of the reference kernels) and tests/onnx/rnn_import_test.py
(checked against onnxruntime there). Equations, per direction, gates in ONNX order:

  LSTM (W rows i, o, f, c):  i = f(Xi + Hi + Pi*C + b_i)   f = f(Xf + Hf + Pf*C + b_f)
                             c~ = g(Xc + Hc + b_c)         C' = f*C + i*c~
                             o = f(Xo + Ho + Po*C' + b_o)  H' = o*h(C')
                             input_forget: f = 1 - i
  GRU (W rows z, r, h):      z = f(Xz + Hz + b_z)          r = f(Xr + Hr + b_r)
                             h~ = g(Xh + (r*H) Rh^T + Rbh + Wbh)      (linear_before_reset = 0)
                             h~ = g(Xh + r*(H Rh^T + Rbh) + Wbh)      (linear_before_reset = 1)
                             H' = (1 - z)*h~ + z*H
where X? = x W?^T and H? = H R?^T. `clip` > 0 clamps every gate's pre-activation to [-clip, clip]
(not the cell). Rows past their sequence length: Y is 0 and the state stays at its last valid step;
the reverse direction starts at each row's own last step (t = len - 1). A row of length 0 has Y_h
(and Y_c) 0, not its initial state (onnxruntime 1.22).
"""

import numpy as np

# name -> (alpha default, beta default, uses alpha, uses beta), as onnxruntime 1.22's rnn helpers:
# ThresholdedRelu, ScaledTanh and Affine default to 0 there (the ThresholdedRelu operator's own
# default is 1.0; measured against onnxruntime, which Ember follows).
ACTIVATIONS = {
    "Sigmoid": (0.0, 0.0, False, False),
    "Tanh": (0.0, 0.0, False, False),
    "Relu": (0.0, 0.0, False, False),
    "HardSigmoid": (0.2, 0.5, True, True),
    "LeakyRelu": (0.01, 0.0, True, False),
    "ThresholdedRelu": (0.0, 0.0, True, False),
    "ScaledTanh": (0.0, 0.0, True, True),
    "Affine": (0.0, 0.0, True, True),
    "Elu": (1.0, 0.0, True, False),
    "Softsign": (0.0, 0.0, False, False),
    "Softplus": (0.0, 0.0, False, False),
}
# The order of schema/program.fbs's RnnActivation (1-based there).
ACTIVATION_CODES = ["Sigmoid", "Tanh", "Relu", "HardSigmoid", "LeakyRelu", "ThresholdedRelu",
                    "ScaledTanh", "Affine", "Elu", "Softsign", "Softplus"]


def resolve_activations(names, alphas=None, betas=None):
    """ONNX activation_alpha / activation_beta are consumed in order by the activations that take
    one; missing ones take the operator's default (onnxruntime's rule). -> [(name, alpha, beta)]."""
    alphas, betas = list(alphas or []), list(betas or [])
    out = []
    for n in names:
        da, db, ua, ub = ACTIVATIONS[n]
        a = alphas.pop(0) if ua and alphas else da
        b = betas.pop(0) if ub and betas else db
        out.append((n, float(np.float32(a)), float(np.float32(b))))
    return out


def act(x, name, alpha, beta):
    if name == "Sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if name == "Tanh":
        return np.tanh(x)
    if name == "Relu":
        return np.maximum(x, 0.0)
    if name == "HardSigmoid":
        return np.clip(alpha * x + beta, 0.0, 1.0)
    if name == "LeakyRelu":
        return np.where(x >= 0, x, alpha * x)
    if name == "ThresholdedRelu":
        return np.where(x > alpha, x, 0.0)
    if name == "ScaledTanh":
        return alpha * np.tanh(beta * x)
    if name == "Affine":
        return alpha * x + beta
    if name == "Elu":
        return np.where(x >= 0, x, alpha * (np.exp(np.minimum(x, 0.0)) - 1.0))
    if name == "Softsign":
        return x / (1.0 + np.abs(x))
    if name == "Softplus":
        return np.logaddexp(0.0, x)
    raise ValueError(name)


def _clip(x, clip):
    return np.clip(x, -clip, clip) if clip and clip > 0 else x


def rnn(kind, x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None, direction="forward",
        activations=None, clip=0.0, input_forget=0, linear_before_reset=0):
    """kind "lstm" or "gru". Arrays as ONNX layout 0; activations: [(name, alpha, beta)] for every
    direction (3 per direction for LSTM, 2 for GRU). Returns float64 (Y, Y_h[, Y_c])."""
    gates = 4 if kind == "lstm" else 3
    T, B, _ = x.shape
    D = 2 if direction == "bidirectional" else 1
    H = w.shape[1] // gates
    per = 3 if kind == "lstm" else 2
    if activations is None:
        names = (["Sigmoid", "Tanh", "Tanh"] if kind == "lstm" else ["Sigmoid", "Tanh"]) * D
        activations = resolve_activations(names)
    x = np.asarray(x, np.float64)
    lens = np.full(B, T, np.int64) if seq_lens is None else np.asarray(seq_lens, np.int64)
    y = np.zeros((T, D, B, H))
    y_h = np.zeros((D, B, H))
    y_c = np.zeros((D, B, H))
    for d in range(D):
        reverse = direction == "reverse" or d == 1
        f_, g_ = activations[d * per], activations[d * per + 1]
        h_ = activations[d * per + 2] if kind == "lstm" else None
        F = lambda v, a=f_: act(v, *a)  # noqa: E731
        G = lambda v, a=g_: act(v, *a)  # noqa: E731
        W, R = np.asarray(w[d], np.float64), np.asarray(r[d], np.float64)
        bias = np.zeros(2 * gates * H) if b is None else np.asarray(b[d], np.float64)
        wb, rb = bias[:gates * H], bias[gates * H:]
        for row in range(B):
            h = np.zeros(H) if h0 is None else np.asarray(h0[d, row], np.float64)
            c = np.zeros(H) if c0 is None else np.asarray(c0[d, row], np.float64)
            n = int(lens[row])
            steps = range(n - 1, -1, -1) if reverse else range(n)
            for t in steps:
                xw = W @ x[t, row] + wb
                if kind == "lstm":
                    hr = R @ h + rb
                    pre = lambda k: xw[k * H:(k + 1) * H] + hr[k * H:(k + 1) * H]  # noqa: E731
                    pi, po, pf = (np.zeros(H),) * 3 if p is None else (
                        np.asarray(p[d, :H], np.float64), np.asarray(p[d, H:2 * H], np.float64),
                        np.asarray(p[d, 2 * H:], np.float64))
                    i = F(_clip(pre(0) + pi * c, clip))
                    f = 1.0 - i if input_forget else F(_clip(pre(2) + pf * c, clip))
                    cc = G(_clip(pre(3), clip))
                    c = f * c + i * cc
                    o = F(_clip(pre(1) + po * c, clip))
                    h = o * act(c, *h_)
                else:
                    rz, rr, rh = R[:H], R[H:2 * H], R[2 * H:]
                    z = F(_clip(xw[:H] + rz @ h + rb[:H], clip))
                    rg = F(_clip(xw[H:2 * H] + rr @ h + rb[H:2 * H], clip))
                    if linear_before_reset:
                        pre_h = xw[2 * H:] + rg * (rh @ h + rb[2 * H:])
                    else:
                        pre_h = xw[2 * H:] + rh @ (rg * h) + rb[2 * H:]
                    hh = G(_clip(pre_h, clip))
                    h = (1.0 - z) * hh + z * h
                y[t, d, row] = h
            if n > 0:
                y_h[d, row] = h
                y_c[d, row] = c
    return (y, y_h, y_c) if kind == "lstm" else (y, y_h)
