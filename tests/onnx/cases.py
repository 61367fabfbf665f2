"""The ONNX end-to-end cases: one row per model, each run at every opset in OPSETS.

Plain data and no torch import, so CMake can list the cases at configure time quickly:
  .venv/bin/python tests/onnx/cases.py --list      # one "<case>;<labels>" per line

A case name is "<model>_opset<N>". Input sizes are the smallest each architecture accepts (or
close to it) to keep CI fast; see tests/onnx/README.md for the reasons and the measured times.
"""
import os
import sys

OPSETS = (13, 17)
# Debian's torch 1.13 exports up to opset 17; opsets 18-21 are made from its opset-17 export with
# onnx's version converter (PyPI onnx, requirements.txt), for a subset of models covering every op.
TORCH_MAX_OPSET = 17
CONVERTED_OPSETS = (18, 19, 20, 21)
CONVERTED_MODELS = ("resnet18", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "vit_b_32",
                    "swin_t", "inception_v3")

# model -> (kind, input spec, options)
#   kind "tv": a torchvision 0.14 classification model built with weights=None (options are the
#   builder's kwargs); input spec (N, C, H, W). "tv_batch": the same with a dynamic batch axis, run at
#   batch sizes BATCHES through one symbolic program. "bert", "bert_dynseq": the BERT-style encoder in
#   make_models.py with a symbolic batch, or a symbolic batch and sequence length.
#   "unsupported": an ONNX file with an op Ember does not import, checking the exporter's error.
CNN = (1, 3, 64, 64)
TV = {
    # ResNet / ResNeXt / Wide-ResNet
    "resnet18": CNN, "resnet34": CNN, "resnet50": CNN, "resnet101": CNN, "resnet152": CNN,
    "resnext50_32x4d": CNN, "resnext101_32x8d": CNN, "resnext101_64x4d": CNN,
    "wide_resnet50_2": CNN, "wide_resnet101_2": CNN,
    # MobileNet, EfficientNet, MnasNet, ShuffleNet, SqueezeNet
    "mobilenet_v2": CNN, "mobilenet_v3_small": CNN, "mobilenet_v3_large": CNN,
    "efficientnet_b0": CNN, "efficientnet_b1": CNN, "efficientnet_b2": CNN, "efficientnet_b3": CNN,
    "efficientnet_b4": CNN, "efficientnet_b5": CNN, "efficientnet_b6": CNN, "efficientnet_b7": CNN,
    "efficientnet_v2_s": CNN, "efficientnet_v2_m": CNN, "efficientnet_v2_l": CNN,
    "mnasnet0_5": CNN, "mnasnet0_75": CNN, "mnasnet1_0": CNN, "mnasnet1_3": CNN,
    "shufflenet_v2_x0_5": CNN, "shufflenet_v2_x1_0": CNN, "shufflenet_v2_x1_5": CNN, "shufflenet_v2_x2_0": CNN,
    "squeezenet1_0": CNN, "squeezenet1_1": CNN,
    # DenseNet, GoogLeNet, Inception-v3 (75x75 is its smallest input)
    "densenet121": CNN, "densenet161": CNN, "densenet169": CNN, "densenet201": CNN,
    "googlenet": CNN, "inception_v3": (1, 3, 75, 75),
    # RegNet
    "regnet_x_400mf": CNN, "regnet_x_800mf": CNN, "regnet_x_1_6gf": CNN, "regnet_x_3_2gf": CNN,
    "regnet_x_8gf": CNN, "regnet_x_16gf": CNN, "regnet_x_32gf": CNN,
    "regnet_y_400mf": CNN, "regnet_y_800mf": CNN, "regnet_y_1_6gf": CNN, "regnet_y_3_2gf": CNN,
    "regnet_y_8gf": CNN, "regnet_y_16gf": CNN, "regnet_y_32gf": CNN, "regnet_y_128gf": CNN,
    # VGG and AlexNet: AdaptiveAvgPool2d(7x7 / 6x6) exports only when the feature map is a multiple
    # of it, so 224 is their smallest input.
    "vgg11": (1, 3, 224, 224), "vgg11_bn": (1, 3, 224, 224), "vgg13": (1, 3, 224, 224),
    "vgg13_bn": (1, 3, 224, 224), "vgg16": (1, 3, 224, 224), "vgg16_bn": (1, 3, 224, 224),
    "vgg19": (1, 3, 224, 224), "vgg19_bn": (1, 3, 224, 224),
    "alexnet": (1, 3, 224, 224),
    # ConvNeXt
    "convnext_tiny": CNN, "convnext_small": CNN, "convnext_base": CNN, "convnext_large": CNN,
    # Transformers: ViT takes image_size (a multiple of its patch); Swin pads to its 7x7 windows, so
    # 224 keeps every stage unpadded; MaxViT needs 224 (every stage a multiple of 7).
    "vit_b_16": (1, 3, 64, 64), "vit_b_32": (1, 3, 64, 64), "vit_l_16": (1, 3, 64, 64),
    "vit_l_32": (1, 3, 64, 64), "vit_h_14": (1, 3, 56, 56),
    "swin_t": (1, 3, 224, 224), "swin_s": (1, 3, 224, 224), "swin_b": (1, 3, 224, 224),
    "swin_v2_t": (1, 3, 224, 224), "swin_v2_s": (1, 3, 224, 224), "swin_v2_b": (1, 3, 224, 224),
    "maxvit_t": (1, 3, 224, 224),
}

# Builder kwargs beyond weights=None.
OPTIONS = {
    # As shipped with weights: inputs re-normalized in the graph (Slice/Mul/Add/Concat).
    "googlenet": {"aux_logits": False, "init_weights": False, "transform_input": True},
    "inception_v3": {"aux_logits": False, "init_weights": False, "transform_input": True},
}
for _m, _shape in TV.items():
    if _m.startswith("vit_"):
        OPTIONS[_m] = {"image_size": _shape[2]}

BATCHES = (1, 3)          # batch sizes run through one program with a dynamic batch axis
BATCH_MAX = 8             # the exporter's upper bound for the symbolic batch
BATCH_MODELS = ("resnet18", "mobilenet_v3_small")

# The BERT-style encoder: "bert_encoder" has a symbolic batch (seq fixed at 16) and runs two batch
# sizes through one program; "bert_encoder_dynseq" makes seq symbolic too (positions are then sliced
# from a buffer by a run-time length, as Hugging Face models do) and also runs another length.
BERT_SEQ = 16
BERT_BATCHES = (1, 4)
BERT_DYNSEQ_RUNS = ((1, 16), (4, 16), (2, 9))   # (batch, seq)
BERT_MAX = (8, 32)

UNSUPPORTED = ("unsupported_det", "unsupported_custom")

# Files written by PyTorch 2's exporters (dynamo-based at opsets 18 and 21, TorchScript-based at 20),
# made by make_torch2_models.py on a machine with PyTorch 2.11 and checked in with their inputs and
# PyTorch's outputs: one case "torch2_<dir>" per folder.
TORCH2_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                           "onnx_torch2"))


# Known gaps: models whose export Ember refuses today, with the ONNX op it names. These cases pass
# when the export fails with exit status 1 naming that op (so the gap is checked, and the case turns
# red the day the op is supported: move the model back to a normal case then).
KNOWN_GAPS = {}
# Of the gaps, CI checks those of these models; the rest are registered with -DEMBER_ONNX_FULL=ON.
CI_GAPS = ()


def cases():
    """Every case: name -> dict(kind, model, opset, shape, options)."""
    out = {}
    for opset in OPSETS:
        for m, shape in TV.items():
            out[f"{m}_opset{opset}"] = dict(kind="tv", model=m, opset=opset, shape=shape,
                                            options=OPTIONS.get(m, {}), gap=KNOWN_GAPS.get(m))
        for m in BATCH_MODELS:
            out[f"{m}_batch_opset{opset}"] = dict(kind="tv_batch", model=m, opset=opset, shape=TV[m],
                                                  options=OPTIONS.get(m, {}))
        out[f"bert_encoder_opset{opset}"] = dict(kind="bert", model="bert_encoder", opset=opset)
        out[f"bert_encoder_dynseq_opset{opset}"] = dict(kind="bert_dynseq", model="bert_encoder",
                                                        opset=opset)
    for opset in CONVERTED_OPSETS:
        for m in CONVERTED_MODELS:
            out[f"{m}_opset{opset}"] = dict(kind="tv", model=m, opset=opset, shape=TV[m],
                                            options=OPTIONS.get(m, {}))
        out[f"bert_encoder_opset{opset}"] = dict(kind="bert", model="bert_encoder", opset=opset)
    for u in UNSUPPORTED:
        out[u] = dict(kind="unsupported", model=u, opset=17)
    for d in sorted(os.listdir(TORCH2_DIR)):
        out[f"torch2_{d}"] = dict(kind="torch2", model=d, opset=int(d.rsplit("opset", 1)[1]))
    return out


# CNN cases also run delegated to the XNNPACK backend (`exporter --backends xnnpack,portable`), as
# ctest ember_onnx_<case>_xnnpack when the build has the backend; same model, references and
# tolerance as the portable case (backends/xnnpack/README.md).
XNNPACK_CASES = ("resnet18_opset17", "mobilenet_v2_opset17", "mobilenet_v3_small_opset17",
                 "squeezenet1_1_opset17", "efficientnet_b0_opset17")

# Cases the sanitizer builds run too (small models: the importer and runtime under ASan + UBSan).
SANITIZER_CASES = ("mobilenet_v3_small_opset13", "resnet18_batch_opset17", "bert_encoder_opset17",
                   "unsupported_det", "unsupported_custom", "torch2_encoder_dynamo_opset21",
                   "torch2_cnn_dynamo_opset18")

# Models registered only with -DEMBER_ONNX_FULL=ON: too slow or too large for CI's time and disk
# (each costs 20-230 s of one core per opset, 0.3-2.6 GB of ONNX; their ops are those of the
# family members CI runs). Measured costs: README.md.
FULL_ONLY_MODELS = (
    "regnet_y_128gf", "regnet_y_32gf", "regnet_x_32gf",
    "vit_h_14", "vit_l_16", "vit_l_32",
    "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn",
    "convnext_large", "wide_resnet101_2", "resnext101_64x4d",
    "efficientnet_b7", "efficientnet_v2_l", "swin_b", "swin_v2_b", "swin_s", "swin_v2_s",
)


def tier(name):
    spec = cases()[name]
    if spec["model"] in FULL_ONLY_MODELS:
        return "full"
    if spec.get("gap") and spec["model"] not in CI_GAPS:
        return "full"
    return "ci"


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--list" and set(args[1:]) <= {"--full", "--sanitizer"}:
        for name in cases():
            if "--sanitizer" in args and name not in SANITIZER_CASES:
                continue
            if "--full" not in args and tier(name) != "ci":
                continue
            print(name)
    elif args == ["--list-xnnpack"]:
        for name in XNNPACK_CASES:
            print(name)
    else:
        sys.exit("usage: cases.py --list [--full] [--sanitizer] | --list-xnnpack")
