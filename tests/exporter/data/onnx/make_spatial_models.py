"""ONNX models for the importer's Resize / ConvTranspose / 1-D Conv tests (issue 17), with
onnxruntime's outputs as the reference.

Run by ember_exporter_test (onnx_spatial_test.cc) with the project venv's python (onnxruntime 1.22;
Debian's torch 1.13 is visible from it):

    .venv/bin/python tests/exporter/data/onnx/make_spatial_models.py OUT_DIR

Writes, per case: <case>.onnx, <case>.input.bin / .input_shape.txt (f32), <case>.output.bin /
.output_shape.txt (onnxruntime's result) and cases.txt (one "<case> <tolerance>" per line; 0 =
bit-exact). torch.onnx.export covers what PyTorch emits (F.interpolate, ConvTranspose1d/2d,
Conv1d); onnx.helper the modes and attributes torch never writes.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(17)
lines = []


def save_case(name, model_bytes, x, tol):
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(model_bytes)
    x.astype(np.float32).tofile(os.path.join(OUT, name + ".input.bin"))
    y.astype(np.float32).tofile(os.path.join(OUT, name + ".output.bin"))
    for what, arr in (("input", x), ("output", y)):
        with open(os.path.join(OUT, f"{name}.{what}_shape.txt"), "w") as f:
            f.write(" ".join(str(d) for d in arr.shape) + "\n")
    lines.append(f"{name} {tol!r}")


def helper_case(name, op, attrs, x_shape, inits=(), inputs=None, opset=19, tol=1e-5):
    """One node `op` on input x (and initializers `inits` = [(name, TensorProto type, values)])."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    tensors = []
    for iname, itype, values in inits:
        arr = np.asarray(values)
        tensors.append(helper.make_tensor(iname, itype, list(arr.shape), arr.flatten().tolist()))
    node = helper.make_node(op, inputs if inputs is not None else ["x"] + [i[0] for i in inits], ["y"], **attrs)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    save_case(name, model.SerializeToString(), x, tol)


F, I64 = TensorProto.FLOAT, TensorProto.INT64

# ---- Resize by onnx.helper: every coordinate and nearest mode, scales and sizes, cubic options.
for coord in ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "half_pixel_symmetric"):
    for nearest in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        helper_case(f"resize_nearest_{coord}_{nearest}", "Resize",
                    dict(mode="nearest", coordinate_transformation_mode=coord, nearest_mode=nearest),
                    (1, 2, 5, 7), [("scales", F, [1, 1, 2.0, 1.5])], inputs=["x", "", "scales"], tol=0.0)
    helper_case(f"resize_nearest_{coord}_sizes", "Resize", dict(mode="nearest", coordinate_transformation_mode=coord),
                (1, 2, 6, 5), [("sizes", I64, [1, 2, 4, 9])], inputs=["x", "", "", "sizes"], tol=0.0)
    helper_case(f"resize_linear_{coord}", "Resize", dict(mode="linear", coordinate_transformation_mode=coord),
                (2, 3, 4, 6), [("scales", F, [1, 1, 2.0, 0.5])], inputs=["x", "", "scales"])
    helper_case(f"resize_linear_{coord}_sizes", "Resize", dict(mode="linear", coordinate_transformation_mode=coord),
                (1, 2, 5, 4), [("sizes", I64, [1, 2, 1, 7])], inputs=["x", "", "", "sizes"])
    helper_case(f"resize_cubic_{coord}", "Resize", dict(mode="cubic", coordinate_transformation_mode=coord),
                (1, 2, 5, 6), [("sizes", I64, [1, 2, 9, 4])], inputs=["x", "", "", "sizes"])
helper_case("resize_cubic_exclude_a05", "Resize",
            dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1, coordinate_transformation_mode="half_pixel"),
            (1, 1, 6, 6), [("scales", F, [1, 1, 1.7, 0.6])], inputs=["x", "", "scales"])
helper_case("resize_linear_2d", "Resize", dict(mode="linear"), (5, 6), [("scales", F, [1.5, 2.0])],
            inputs=["x", "", "scales"])
helper_case("resize_linear_trilinear", "Resize", dict(mode="linear", coordinate_transformation_mode="align_corners"),
            (3, 4, 5), [("sizes", I64, [5, 3, 8])], inputs=["x", "", "", "sizes"])
helper_case("resize_nearest_rank5", "Resize", dict(mode="nearest"), (1, 2, 2, 3, 2), [("scales", F, [1, 1, 2, 2, 3])],
            inputs=["x", "", "scales"], tol=0.0)
# Opset 18: axes; opset 11: roi input and an empty scales tensor before sizes.
helper_case("resize_axes_opset18", "Resize", dict(mode="linear", axes=[2, 3]), (1, 3, 4, 5), [("scales", F, [2.0, 3.0])],
            inputs=["x", "", "scales"], opset=18)
# (A negative axis is legal ONNX, but onnxruntime 1.22 ignores sizes on axes=[-1]: Ember follows the spec.)
helper_case("resize_axes_sizes_opset18", "Resize", dict(mode="nearest", axes=[3]), (1, 3, 4, 5), [("sizes", I64, [8])],
            inputs=["x", "", "", "sizes"], opset=18, tol=0.0)
helper_case("resize_opset11_roi_sizes", "Resize", dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                                                       nearest_mode="floor"),
            (1, 2, 3, 4), [("roi", F, np.zeros(0)), ("scales", F, np.zeros(0)), ("sizes", I64, [1, 2, 6, 8])],
            inputs=["x", "roi", "scales", "sizes"], opset=11, tol=0.0)
helper_case("resize_same_size_copy", "Resize", dict(mode="cubic"), (1, 2, 5, 5), [("scales", F, [1, 1, 1.1, 1.1])],
            inputs=["x", "", "scales"], tol=0.0)

# ---- ConvTranspose / Conv 1-D by onnx.helper: auto_pad, output_shape, groups, dilations.
w2 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
b6 = rng.standard_normal((6,)).astype(np.float32)
for pad in ("SAME_UPPER", "SAME_LOWER", "VALID"):
    helper_case(f"conv_transpose_{pad.lower()}", "ConvTranspose", dict(strides=[2, 2], auto_pad=pad), (1, 4, 5, 6),
                [("w", F, w2[:, :3])], opset=17)
helper_case("conv_transpose_output_shape", "ConvTranspose", dict(strides=[2, 2], output_shape=[10, 12]), (1, 4, 5, 6),
            [("w", F, w2[:, :3])], opset=17)
helper_case("conv_transpose_output_shape_upper", "ConvTranspose",
            dict(strides=[3, 2], output_shape=[1, 3, 14, 12], auto_pad="SAME_UPPER", output_padding=[1, 1]),
            (1, 4, 5, 6), [("w", F, w2[:, :3])], opset=17)
helper_case("conv_transpose_groups_dilations", "ConvTranspose",
            dict(strides=[1, 2], group=2, dilations=[2, 1], pads=[1, 0, 2, 1], output_padding=[0, 1]), (1, 4, 5, 6),
            [("w", F, w2), ("b", F, b6)], opset=13)
helper_case("conv_transpose_1d_same_upper", "ConvTranspose", dict(strides=[3], auto_pad="SAME_UPPER"), (2, 4, 7),
            [("w", F, w2[:, :, 0, :])], opset=17)
helper_case("conv1d_same_lower_stride2", "Conv", dict(strides=[2], auto_pad="SAME_LOWER"), (1, 3, 11),
            [("w", F, w2[:, :, 0, :].transpose(1, 0, 2)[:, :3].copy()), ("b", F, b6[:3])], opset=13)

# ---- torch.onnx.export (Debian's torch 1.13): what PyTorch writes.
try:
    import io

    import torch
    import torch.nn as nn
    import torch.nn.functional as fn

    class Interp(nn.Module):
        def __init__(self, **kw):
            super().__init__()
            self.kw = kw

        def forward(self, x):
            return fn.interpolate(x, **self.kw)

    def torch_case(name, module, x_shape, opset, tol=1e-5):
        torch.manual_seed(len(lines))
        module = module.eval()
        x = torch.randn(*x_shape)
        buf = io.BytesIO()
        torch.onnx.export(module, (x,), buf, opset_version=opset, input_names=["x"], output_names=["y"])
        save_case(name, buf.getvalue(), x.numpy(), tol)

    for opset in (13, 17):
        torch_case(f"torch_nearest_x2_opset{opset}", Interp(scale_factor=2, mode="nearest"), (1, 3, 5, 7), opset, 0.0)
        torch_case(f"torch_nearest_size_opset{opset}", Interp(size=(3, 11), mode="nearest"), (1, 2, 6, 5), opset, 0.0)
        torch_case(f"torch_bilinear_opset{opset}", Interp(scale_factor=2, mode="bilinear", align_corners=False),
                   (1, 3, 4, 6), opset)
        torch_case(f"torch_bilinear_align_opset{opset}", Interp(size=(7, 9), mode="bilinear", align_corners=True),
                   (2, 2, 4, 5), opset)
        torch_case(f"torch_bicubic_opset{opset}", Interp(scale_factor=1.5, mode="bicubic", align_corners=False),
                   (1, 2, 6, 6), opset)
        torch_case(f"torch_linear_1d_opset{opset}", Interp(scale_factor=3, mode="linear", align_corners=False),
                   (1, 3, 5), opset)
        torch_case(f"torch_conv_transpose2d_opset{opset}",
                   nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), (1, 4, 5, 7), opset)
        torch_case(f"torch_conv_transpose2d_k2s2_opset{opset}", nn.ConvTranspose2d(8, 4, 2, stride=2, bias=False),
                   (1, 8, 6, 5), opset)
        torch_case(f"torch_conv_transpose1d_opset{opset}", nn.ConvTranspose1d(3, 5, 4, stride=2, padding=1),
                   (2, 3, 9), opset)
        torch_case(f"torch_conv1d_opset{opset}",
                   nn.Sequential(nn.Conv1d(3, 6, 5, stride=2, padding=2, groups=3), nn.ReLU(),
                                 nn.Conv1d(6, 4, 3, dilation=2, padding=2)), (1, 3, 16), opset)
except ImportError as e:  # without torch the helper cases still run
    print(f"torch cases skipped: {e}", file=sys.stderr)

with open(os.path.join(OUT, "cases.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"{len(lines)} cases written to {OUT}", file=sys.stderr)
