"""Golden cases of resize and conv_transpose2d (issue 17), called by make_golden.py's main().

Resize follows onnxruntime 1.22's CPU kernel (its f32 coordinate arithmetic, nearest rounding,
linear clamping and cubic coefficients), written here as one weight matrix per dim applied axis by
axis in float64 (not the C++ kernels' loop). conv_transpose2d is ONNX ConvTranspose as a scatter of
every input element through the kernel, in float64.
"""

import numpy as np

F = np.float32


def src_coord(coord, x, scale, out_len, in_len):
    x, scale, lo, li = F(x), F(scale), F(out_len), F(in_len)
    if coord == "asymmetric":
        return x / scale
    if coord == "pytorch_half_pixel":
        return (x + F(0.5)) / scale - F(0.5) if lo > 1 else F(0.0)
    if coord == "align_corners":
        return F(0.0) if lo == 1 else x * (li - F(1)) / (lo - F(1))
    if coord == "half_pixel_symmetric":
        adjustment = lo / (scale * li)
        offset = (li / F(2)) * (F(1) - adjustment)
        return F(float(offset) + (float(x) + 0.5) / float(scale) - 0.5)
    return (x + F(0.5)) / scale - F(0.5)  # half_pixel


def nearest_index(mode, c, n):
    c = float(c)
    if mode == "round_prefer_ceil":
        i = int(np.floor(c + 0.5)) if c >= 0 else -int(np.floor(-c + 0.5))
    elif mode == "floor":
        i = int(np.floor(c))
    elif mode == "ceil":
        i = int(np.ceil(c))
    else:  # round_prefer_floor: halves go down
        i = int(np.ceil(c - 0.5)) if c - np.floor(c) == 0.5 else int(np.floor(c + 0.5)) if c >= 0 else -int(np.floor(-c + 0.5))
    return min(max(i, 0), n - 1)


def cubic_coeffs(s, a):
    s, a = F(abs(s)), F(a)
    one, two = F(1), F(2)
    return [((a * (s + one) - F(5) * a) * (s + one) + F(8) * a) * (s + one) - F(4) * a,
            ((a + two) * s - (a + F(3))) * s * s + one,
            ((a + two) * (one - s) - (a + F(3))) * (one - s) * (one - s) + one,
            ((a * (two - s) - F(5) * a) * (two - s) + F(8) * a) * (two - s) - F(4) * a]


def dim_matrix(mode, coord, nearest, a, exclude, scale, n_in, n_out):
    m = np.zeros((n_out, n_in))
    if F(scale) == F(1) and n_in == n_out:
        return np.eye(n_in)
    for x in range(n_out):
        c = src_coord(coord, x, scale, n_out, n_in)
        if mode == "nearest":
            m[x, nearest_index(nearest, c, n_in)] = 1.0
        elif mode == "linear":
            v = min(max(F(c), F(0)), F(n_in - 1))
            i0 = min(int(v), n_in - 1)
            i1 = min(i0 + 1, n_in - 1)
            if i0 == i1:
                m[x, i0] += 0.5
                m[x, i1] += 0.5
            else:
                m[x, i0] += float(abs(v - F(i1)))
                m[x, i1] += float(abs(v - F(i0)))
        else:
            base = int(np.floor(c))
            coeff = cubic_coeffs(F(c) - F(base), a)
            total = F(1)
            if exclude:
                total = F(0)
                for k in range(4):
                    if not 0 <= base - 1 + k < n_in:
                        coeff[k] = F(0)
                    total = F(total + coeff[k])
            for k in range(4):
                m[x, min(max(base - 1 + k, 0), n_in - 1)] += float(F(coeff[k] / total))
    return m


def resize_ref(x, out_shape, scales, mode="nearest", coord="half_pixel", nearest="round_prefer_floor",
               a=-0.75, exclude=False):
    x = np.asarray(x, dtype=np.float64)
    if tuple(out_shape) == x.shape:
        return x.astype(F)
    for ax in range(x.ndim):
        m = dim_matrix(mode, coord, nearest, a, exclude, scales[ax], x.shape[ax], out_shape[ax])
        x = np.moveaxis(np.tensordot(m, np.moveaxis(x, ax, 0), axes=1), 0, ax)
    return x.astype(F)


def conv_transpose_ref(x, w, b, stride, pads, dilation, output_padding, groups):
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    oh = stride[0] * (h - 1) + output_padding[0] + (kh - 1) * dilation[0] + 1 - pads[0] - pads[2]
    ow = stride[1] * (wd - 1) + output_padding[1] + (kw - 1) * dilation[1] + 1 - pads[1] - pads[3]
    # Scatter into a canvas with room for the padding, then crop.
    full = np.zeros((n, og * groups, oh + pads[0] + pads[2] + kh * dilation[0] + stride[0],
                     ow + pads[1] + pads[3] + kw * dilation[1] + stride[1]))
    for ci in range(c):
        g = ci // cg
        for i in range(kh):
            for j in range(kw):
                ys = np.arange(h) * stride[0] + i * dilation[0]
                xs = np.arange(wd) * stride[1] + j * dilation[1]
                full[:, g * og:(g + 1) * og, ys[:, None], xs[None, :]] += (
                    x[:, ci, None, :, :] * w[ci, None, :, i, j, None, None])
    out = full[:, :, pads[0]:pads[0] + oh, pads[1]:pads[1] + ow]
    if b is not None:
        out = out + np.asarray(b, np.float64)[None, :, None, None]
    return out.astype(F)


def gen(add_case, randn, rng, f32_tol, exact):
    r = rng(1700)

    def resize(name, shape, out_shape, scales, mode="nearest", coord="half_pixel", nearest="round_prefer_floor",
               a=-0.75, exclude=False, sizes=None):
        x = randn(r, *shape)
        y = resize_ref(x, out_shape, scales, mode, coord, nearest, a, exclude)
        assert y.shape == tuple(out_shape), (name, y.shape, out_shape)
        sizes = list(out_shape) if sizes is None else sizes
        add_case(name, "resize", [x], y, exact if mode == "nearest" else f32_tol, resize_mode=mode, coord=coord,
                 nearest_mode=nearest, cubic_a=float(a), exclude_outside=exclude, scales=[float(s) for s in scales],
                 shape=sizes, shape_sym=[0] * len(sizes))

    # Nearest: FPN x2 upsampling (half_pixel / round_prefer_floor and asymmetric / floor), downsampling,
    # sizes-derived scales, every rounding and coordinate mode.
    resize("resize_nearest_x2", (1, 2, 3, 5), (1, 2, 6, 10), (1, 1, 2, 2))
    resize("resize_nearest_x2_asym_floor", (2, 3, 4, 3), (2, 3, 8, 6), (1, 1, 2, 2), coord="asymmetric", nearest="floor",
           sizes=[-1, -1, -1, -1])
    resize("resize_nearest_down", (1, 1, 7, 9), (1, 1, 4, 5), (1, 1, 0.6, 0.6), coord="asymmetric")
    resize("resize_nearest_align_ceil", (1, 1, 3, 4), (1, 1, 5, 7), (1, 1, 5 / 3, 7 / 4), coord="align_corners",
           nearest="round_prefer_ceil")
    resize("resize_nearest_pytorch_ceil", (1, 2, 4, 4), (1, 2, 1, 6), (1, 1, 0.25, 1.5), coord="pytorch_half_pixel",
           nearest="ceil")
    resize("resize_nearest_symmetric", (1, 1, 5, 4), (1, 1, 7, 6), (1, 1, 1.5, 1.5), coord="half_pixel_symmetric")
    resize("resize_nearest_rank3", (2, 5, 3), (4, 5, 7), (2, 1, 7 / 3), nearest="round_prefer_ceil")
    resize("resize_identity", (1, 2, 3, 3), (1, 2, 3, 3), (1, 1, 1.1, 1.2), mode="linear")
    # Linear: bilinear on NCHW in every coordinate mode, a width-1 output, 1-D and 3-D.
    resize("resize_linear_x2", (1, 2, 4, 5), (1, 2, 8, 10), (1, 1, 2, 2), mode="linear")
    resize("resize_linear_align", (1, 1, 4, 5), (1, 1, 7, 3), (1, 1, 7 / 4, 3 / 5), mode="linear", coord="align_corners")
    resize("resize_linear_asym", (2, 1, 3, 3), (2, 1, 7, 5), (1, 1, 7 / 3, 5 / 3), mode="linear", coord="asymmetric")
    resize("resize_linear_pytorch", (1, 3, 5, 6), (1, 3, 1, 4), (1, 1, 0.2, 4 / 6), mode="linear",
           coord="pytorch_half_pixel")
    resize("resize_linear_symmetric", (1, 1, 4, 6), (1, 1, 6, 8), (1, 1, 1.5, 1.4), mode="linear",
           coord="half_pixel_symmetric")
    resize("resize_linear_1d", (9,), (4,), (0.5,), mode="linear", sizes=[-1])
    resize("resize_linear_3d", (3, 4, 5), (5, 8, 3), (5 / 3, 2, 0.6), mode="linear")
    resize("resize_linear_h_only", (1, 2, 3, 4), (1, 2, 6, 4), (1, 1, 2, 1), mode="linear")
    # Cubic: Keys a = -0.75 (torch) and -0.5 (TF), exclude_outside, downsampling.
    resize("resize_cubic_x2", (1, 2, 4, 4), (1, 2, 8, 8), (1, 1, 2, 2), mode="cubic")
    resize("resize_cubic_align_excl", (1, 1, 5, 4), (1, 1, 7, 9), (1, 1, 7 / 5, 9 / 4), mode="cubic",
           coord="align_corners", a=-0.5, exclude=True)
    resize("resize_cubic_down", (1, 1, 8, 7), (1, 1, 3, 4), (1, 1, 3 / 8, 4 / 7), mode="cubic", coord="asymmetric")
    resize("resize_cubic_2d", (6, 5), (9, 4), (1.5, 0.8), mode="cubic", coord="pytorch_half_pixel", exclude=True)

    def conv_t(name, xs, ws, bias, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), output_padding=(0, 0),
               groups=1):
        x, w = randn(r, *xs), randn(r, *ws)
        b = randn(r, ws[1] * groups) if bias else None
        y = conv_transpose_ref(x, w, b, stride, pads, dilation, output_padding, groups)
        inputs = [x, w, b] if bias else [x, w, None]
        add_case(name, "conv_transpose2d", inputs, y, f32_tol, stride=list(stride), padding=list(pads),
                 dilation=list(dilation), output_padding=list(output_padding), groups=groups)

    conv_t("conv_transpose_s2", (1, 3, 4, 5), (3, 2, 3, 3), True, stride=(2, 2))
    conv_t("conv_transpose_k2s2", (2, 4, 3, 3), (4, 3, 2, 2), True, stride=(2, 2))  # PP-OCR det's upsampling
    conv_t("conv_transpose_pads_outpad", (1, 2, 5, 4), (2, 3, 3, 3), True, stride=(2, 3), pads=(1, 0, 2, 1),
           output_padding=(1, 2))
    conv_t("conv_transpose_groups_dilation", (1, 4, 4, 4), (4, 2, 3, 2), False, stride=(1, 2), dilation=(2, 3),
           groups=2, pads=(1, 1, 0, 2))
    conv_t("conv_transpose_1x1", (1, 5, 3, 2), (5, 4, 1, 1), True)
    conv_t("conv_transpose_1d_as_2d", (2, 3, 1, 7), (3, 4, 1, 5), True, stride=(1, 3), pads=(0, 2, 0, 1))
