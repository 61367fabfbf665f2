#!/usr/bin/env python3
"""Which ONNX ops of each real model (models.json) Ember's ONNX importer cannot handle today.

The exporter stops at the first node it refuses, so its error names one op per model. This lists
them all, statically: every node (If/Loop bodies included) is checked against the importer's own
tables, read from its source:

  - exporter/importers/onnx/onnx_importer.cc `Importer::handlers()`: ops with a run-time mapping
    (the QDQ ops map to `op_quantized`, which refuses them: counted as refused);
  - exporter/importers/onnx/onnx_known.cc `try_known()`: ops evaluated at export on integer values
    that are known there (Shape arithmetic). Such an op with a run-time input is refused.

and the handlers' own limits that real models hit (Conv/pool kernel rank, Pad mode, Softmax axis
before opset 13, inputs that must be known at export). A value is "known at export" when it comes
from initializers, Constant, Shape or Size, through nodes whose inputs are all known, whether or not
the importer has those nodes' ops yet: the report is what remains once every listed op exists.

  .venv/bin/python tests/real_models/op_inventory.py [--cache DIR] [--only IDS]   # text report
  .venv/bin/python tests/real_models/op_inventory.py --markdown                   # README tables
"""
import argparse
import collections
import os
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import fetch_models  # noqa: E402

IMPORTER_DIR = os.path.join(ROOT, "exporter", "importers", "onnx")
# Inputs a handler needs as values known at export (it fails on a run-time tensor there).
NEEDS_KNOWN = {"Reshape": [1], "Expand": [1], "Range": [0, 1, 2], "ConstantOfShape": [0], "Slice": [1, 2, 3, 4],
               "Pad": [1, 3], "Split": [1], "Squeeze": [1], "Unsqueeze": [1], "ReduceMean": [1], "ReduceSum": [1],
               "ReduceL2": [1], "ScatterND": [0, 1, 2]}
INT_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT16, onnx.TensorProto.INT8,
             onnx.TensorProto.UINT8, onnx.TensorProto.BOOL}
HANDLED, EXPORT_TIME = "handled", "export-time"


def importer_tables(importer_dir=IMPORTER_DIR):
    """(handled ops, refusing stub ops, export-time ops) read from the importer's source."""
    with open(os.path.join(importer_dir, "onnx_importer.cc"), encoding="utf-8") as f:
        src = f.read()
    body = src[src.index("Importer::handlers()"):]
    body = body[:body.index("};")]
    pairs = re.findall(r'\{"(\w+)",\s*&Importer::(\w+)\}', body)
    if not pairs:
        raise RuntimeError(f"no handler table found in {importer_dir}/onnx_importer.cc")
    stubs = {op for op, fn in pairs if fn == "op_quantized"}
    handled = {op for op, _ in pairs} - stubs
    with open(os.path.join(importer_dir, "onnx_known.cc"), encoding="utf-8") as f:
        known = set(re.findall(r'op == "(\w+)"', f.read()))
    return handled, stubs, known


def _fmt(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_fmt(x) for x in v) + "]"
    return str(v)


def attrs_of(node):
    out = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            continue
        if a.type == onnx.AttributeProto.TENSOR:
            t = numpy_helper.to_array(a.t)
            out[a.name] = _fmt(t.flatten().tolist()) if t.size <= 4 else f"tensor{list(t.shape)}"
        else:
            out[a.name] = _fmt(onnx.helper.get_attribute_value(a))
    return out


class Scope:
    """Values visible in one graph: constants, producers, dtypes, ranks, and which are known at export."""

    def __init__(self, graph, parent=None, info=None):
        self.parent = parent
        self.consts, self.producer, self.known, self.dtype, self.rank, self.inputs = {}, {}, set(), {}, {}, set()
        info = info if info is not None else {}
        self.info = info
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            t = vi.type.tensor_type
            if t.elem_type:
                self.dtype[vi.name] = t.elem_type
            if t.HasField("shape"):
                self.rank[vi.name] = len(t.shape.dim)
        self.dtype.update({k: v for k, v in info.get("dtype", {}).items() if k not in self.dtype})
        self.rank.update({k: v for k, v in info.get("rank", {}).items() if k not in self.rank})
        for t in graph.initializer:
            self.consts[t.name] = numpy_helper.to_array(t)
            self.dtype[t.name], self.rank[t.name] = t.data_type, len(t.dims)
            self.known.add(t.name)
        for i in graph.input:
            if i.name not in self.consts:
                self.inputs.add(i.name)

    def lookup(self, table, name):
        s = self
        while s is not None:
            if name in getattr(s, table):
                return getattr(s, table)[name]
            s = s.parent
        return None

    def is_known(self, name):
        s = self
        while s is not None:
            if name in s.known:
                return True
            s = s.parent
        return False

    def const(self, name):
        return self.lookup("consts", name)

    def is_graph_input(self, name):
        """'input' for an input of the model, 'body input' for a formal input of a Loop/If body."""
        s = self
        while s is not None:
            if name in s.inputs:
                return "input" if s.parent is None else "body input"
            if name in s.producer or name in s.consts:
                return None
            s = s.parent
        return None


def short(scope, name):
    """A value's name for humans: a graph input, a small constant, or the op that makes it."""
    c = scope.const(name)
    if c is not None:
        return _fmt(c.flatten().tolist()) if c.size <= 4 else f"const{list(c.shape)}"
    kind = scope.is_graph_input(name)
    if kind:
        return f"{kind} '{name}'"
    p = scope.lookup("producer", name)
    return f"{p.op_type} '{p.name}'" if p is not None else f"'{name}'"


def describe(scope, name, depth=0):
    """A compact expression for `name`, stopping at Shape/Size (only the shape matters there)."""
    c = scope.const(name)
    if c is not None or scope.is_graph_input(name):
        return short(scope, name)
    p = scope.lookup("producer", name)
    if p is None:
        return f"'{name}'"
    if p.op_type in ("Shape", "Size"):
        return f"{p.op_type.lower()}({short(scope, p.input[0])})"
    if depth >= 5:
        return f"{p.op_type}(...)"
    extra = "".join(f" {k}={v}" for k, v in attrs_of(p).items() if k in ("axis", "to", "axes"))
    return f"{p.op_type}{extra}(" + ", ".join(describe(scope, i, depth + 1) for i in p.input if i) + ")"


def dependencies(scope, name, seen=None):
    """(graph inputs whose data `name` depends on, whether it depends on a shape)."""
    seen = set() if seen is None else seen
    if name in seen or scope.const(name) is not None:
        return set(), False
    seen.add(name)
    kind = scope.is_graph_input(name)
    if kind:
        return {f"{kind} '{name}'"}, False
    p = scope.lookup("producer", name)
    if p is None:
        return set(), False
    if p.op_type in ("Shape", "Size"):
        return set(), True
    data, shape = set(), False
    for i in p.input:
        if i:
            d, s = dependencies(scope, i, seen)
            data |= d
            shape |= s
    for a in p.attribute:   # values a subgraph reads from outside it
        if a.type == onnx.AttributeProto.GRAPH:
            for n in a.g.node:
                for i in n.input:
                    if i and scope.lookup("producer", i) is not None:
                        d, s = dependencies(scope, i, seen)
                        data |= d
                        shape |= s
    return data, shape


def condition_summary(scope, name):
    data, shape = dependencies(scope, name)
    if data:
        kind = "run-time: the data of " + ", ".join(sorted(data))
    elif shape:
        kind = "export-time: shapes only"
    else:
        kind = "constant"
    return f"{describe(scope, name)} [{kind}]"


def details(node, scope, opset):
    """The attributes and input facts that decide how `node` must be implemented."""
    op, a = node.op_type, attrs_of(node)
    ins = list(node.input) + [""] * 8
    if op in ("LSTM", "GRU", "RNN"):
        opt = {3: "B", 4: "sequence_lens", 5: "initial_h", 6: "initial_c", 7: "P"}
        a["inputs"] = "+".join(v + ("" if k == 3 else "(run-time)" if not scope.is_known(ins[k]) else "(const)")
                               for k, v in opt.items() if ins[k] and (op == "LSTM" or k < 6)) or "-"
        used = [o for o in node.output if o]
        a["outputs"] = "/".join(["Y", "Y_h", "Y_c"][i] for i, o in enumerate(node.output) if o) if used else "-"
        w = scope.const(ins[1])
        if w is not None:
            a["W"] = "x".join(map(str, w.shape))
        for k in ("direction", "layout"):
            a.setdefault(k, {"direction": "forward", "layout": "0"}[k])
    elif op == "Resize":
        a.setdefault("mode", "nearest")
        a.setdefault("coordinate_transformation_mode", "half_pixel")
        if a["mode"] == "nearest":
            a.setdefault("nearest_mode", "round_prefer_floor")
        for idx, what in ((1, "roi"), (2, "scales"), (3, "sizes")):
            if ins[idx]:
                c = scope.const(ins[idx])
                a[what] = (_fmt(c.flatten().tolist()) if c is not None and c.size <= 8 else
                           "known at export" if scope.is_known(ins[idx]) else "run-time")
        a.pop("roi", None) if a.get("roi") in ("[]", None) else None
    elif op in ("Conv", "ConvTranspose"):
        w = scope.const(ins[1])
        r = w.ndim if w is not None else scope.lookup("rank", ins[1])
        a["kernel_rank"] = str(r - 2) if r else "?"
    elif op == "If":
        a["cond"] = condition_summary(scope, ins[0])
    elif op == "Loop":
        a["M"] = describe(scope, ins[0]) if ins[0] else "-"
        a["cond"] = describe(scope, ins[1]) if ins[1] else "-"
        a["carried"] = str(max(0, len(node.input) - 2))
    simple = node.domain in ("", "ai.onnx") and op not in (
        "If", "Loop", "Constant", "LSTM", "GRU", "RNN", "Resize", "Conv", "ConvTranspose")
    if simple:
        for k, i in enumerate(node.input):   # small constant operands (Max(x, 0), Less(i, 500), ...)
            c = scope.const(i) if i else None
            if c is not None and c.size <= 4:
                a[f"in{k}"] = _fmt(c.flatten().tolist())
    if simple:
        rt = [i for i in node.input if i and not scope.is_known(i)]
        if len(rt) != len([i for i in node.input if i]):
            a["run-time inputs"] = f"{len(rt)} of {len([i for i in node.input if i])}"
    return a


def check_node(node, scope, opset, tables):
    """(status, reason): HANDLED, EXPORT_TIME, or 'missing'/'refused' with why."""
    handled, stubs, known_ops = tables
    op = node.op_type
    if node.domain not in ("", "ai.onnx"):
        return "missing", f"domain '{node.domain}'"
    if op in stubs:
        return "refused", "QDQ handler stub (op_quantized)"
    if op in known_ops and op not in handled:
        rt = [i for i in node.input if i and not scope.is_known(i)]
        non_int = [i for i in node.input if i and scope.lookup("dtype", i) not in (None, *INT_TYPES)]
        if not rt and not non_int:
            return EXPORT_TIME, ""
        return "missing", "run-time input" if rt else "non-integer input (export-time evaluation is integer-only)"
    if op not in handled:
        ins = [i for i in node.input if i]
        if ins and op not in ("If", "Loop", "Scan") and all(scope.is_known(i) for i in ins):
            return "missing", "all inputs known at export"
        return "missing", ""
    if op in ("Conv", "ConvTranspose"):   # 1-D and 2-D are taken; 3-D is refused
        w = scope.const(node.input[1])
        r = w.ndim if w is not None else scope.lookup("rank", node.input[1])
        if r is not None and r not in (3, 4):
            return "refused", f"{r - 2}-D convolution"
    if op in ("MaxPool", "AveragePool"):
        ks = attrs_of(node).get("kernel_shape", "")
        if ks.count(",") != 1:
            return "refused", f"kernel_shape {ks}"
    if op == "Pad" and attrs_of(node).get("mode", "constant") not in ("constant", "reflect", "edge"):
        return "refused", f"mode {attrs_of(node)['mode']}"
    if op == "Softmax" and opset < 13:
        r = scope.lookup("rank", node.input[0])
        axis = int(attrs_of(node).get("axis", 1))
        if r is not None and (axis % r) != r - 1:
            return "refused", f"opset {opset} Softmax on axis {axis} of rank {r}"
    for idx in NEEDS_KNOWN.get(op, []):
        if idx < len(node.input) and node.input[idx] and not scope.is_known(node.input[idx]):
            return "refused", f"input {idx} is computed at run time"
    return HANDLED, ""


def walk(graph, scope, opset, tables, out, depth=0):
    for node in graph.node:
        for o in node.output:
            if o:
                scope.producer[o] = node
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    scope.consts[node.output[0]] = numpy_helper.to_array(a.t)
                    scope.dtype[node.output[0]] = a.t.data_type
        status, reason = check_node(node, scope, opset, tables)
        out.append({"op": (node.domain + "." if node.domain not in ("", "ai.onnx") else "") + node.op_type,
                    "status": status, "reason": reason, "depth": depth, "name": node.name,
                    "details": details(node, scope, opset) if status not in (HANDLED, EXPORT_TIME) or
                    node.op_type in ("Conv", "If", "Loop") else {}})
        ins = [i for i in node.input if i]
        if node.op_type in ("Shape", "Size", "Constant") or (node.op_type not in ("If", "Loop", "Scan") and
                                                             all(scope.is_known(i) for i in ins)):
            scope.known.update(o for o in node.output if o)
        entry = out[-1]
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                body = Scope(a.g, scope, scope.info)
                walk(a.g, body, opset, tables, out, depth + 1)
                if node.op_type == "Loop" and a.g.output:   # what ends the loop: the body's cond output
                    entry["details"]["body cond"] = condition_summary(body, a.g.output[0].name)
    return out


def analyze(path, tables=None):
    """Per-node results and model facts for one .onnx file."""
    tables = tables or importer_tables()
    model = onnx.load(path)
    info = {"dtype": {}, "rank": {}}
    try:   # dtypes and ranks of intermediate values, where onnx can infer them
        inferred = onnx.shape_inference.infer_shapes(model)
        for vi in inferred.graph.value_info:
            t = vi.type.tensor_type
            if t.elem_type:
                info["dtype"][vi.name] = t.elem_type
            if t.HasField("shape"):
                info["rank"][vi.name] = len(t.shape.dim)
    except Exception:   # noqa: BLE001 - inference is a hint; the checks fall back to "unknown"
        pass
    opsets = {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
    opset = opsets.get("ai.onnx", 0)
    scope = Scope(model.graph, None, info)
    nodes = walk(model.graph, scope, opset, tables, [])
    return {"opsets": opsets, "opset": opset, "producer": (model.producer_name + " " + model.producer_version).strip(),
            "nodes": nodes}


def gaps(result):
    """{op (with a reason suffix when refused): [nodes]} for every node the importer cannot take."""
    out = collections.OrderedDict()
    for n in result["nodes"]:
        if n["status"] in (HANDLED, EXPORT_TIME):
            continue
        key = n["op"] + (f" ({n['reason']})" if n["reason"] else "")
        out.setdefault(key, []).append(n)
    return out


def gap_summary(result):
    """'LSTM x4, If x25 (3 in subgraphs)' for a model, or '' when nothing is missing."""
    parts = []
    for key, nodes in gaps(result).items():
        sub = sum(1 for n in nodes if n["depth"] > 0)
        parts.append(f"{key} x{len(nodes)}" + (f" ({sub} in subgraphs)" if sub else ""))
    return ", ".join(parts)


def detail_lines(nodes):
    """Distinct attribute sets of `nodes`, each with its count."""
    c = collections.Counter("; ".join(f"{k}={v}" for k, v in sorted(n["details"].items())) for n in nodes)
    return [f"{cnt}x {text or '(no attributes)'}" for text, cnt in c.most_common()]


def report(models, cache, markdown):
    tables = importer_tables()
    rows, matrix, per_model = [], collections.OrderedDict(), {}
    for m in models:
        path = fetch_models.model_path(m, cache)
        if not os.path.isfile(path):
            print(f"{m['id']}: missing from the cache ({path}); run scripts/fetch_models.py", file=sys.stderr)
            continue
        r = analyze(path, tables)
        g = gaps(r)
        total = len(r["nodes"])
        sub = sum(1 for n in r["nodes"] if n["depth"] > 0)
        opsets = ", ".join(f"{k} {v}" for k, v in sorted(r["opsets"].items()) if k == "ai.onnx" or
                           any(n["op"].startswith(k + ".") for n in r["nodes"]))
        matrix[m["id"]] = (opsets, total, sub, gap_summary(r))
        per_model[m["id"]] = collections.Counter()
        for k, v in g.items():
            per_model[m["id"]][k] += len(v)
        if markdown:
            rows.append(f"\n#### {m['id']} ({m['kind']}; opset {opsets}; {r['producer'] or 'producer not set'}; "
                        f"{total} nodes{f', {sub} in If/Loop bodies' if sub else ''})\n")
            if not g:
                rows.append("Every node is handled by the importer today.\n")
                continue
            rows.append("| op | nodes | attributes (count x distinct set) |\n|---|---|---|")
            for key, nodes in g.items():
                d = "<br>".join(s.replace("|", "\\|") for s in detail_lines(nodes))
                nsub = sum(1 for n in nodes if n["depth"] > 0)
                rows.append(f"| {key} | {len(nodes)}{f' ({nsub} nested)' if nsub else ''} | {d} |")
        else:
            print(f"{m['id']}: opset {opsets}; {r['producer'] or 'producer not set'}; {total} nodes ({sub} nested)")
            for key, nodes in g.items():
                print(f"  {key} x{len(nodes)}")
                for line in detail_lines(nodes):
                    print(f"      {line}")
            conds = [n for n in r["nodes"] if n["op"] in ("If", "Loop")]
            for n in conds:
                print(f"    {n['op']} '{n['name']}' (depth {n['depth']}): " + "; ".join(
                    f"{k}={v}" for k, v in n["details"].items() if k in ("cond", "M")))
    if markdown:
        print("| model | opset | nodes (nested) | ops the importer cannot take today (nodes) |\n|---|---|---|---|")
        for mid, (opsets, total, sub, summary) in matrix.items():
            print(f"| {mid} | {opsets} | {total} ({sub}) | {summary or '(none)'} |")
        print("\n| op | models (nodes) |\n|---|---|")
        by_op = collections.OrderedDict()
        for mid, (_, _, _, summary) in matrix.items():
            for key, count in per_model[mid].items():
                by_op.setdefault(key, []).append(f"{mid} ({count})")
        for op in sorted(by_op, key=lambda o: (-len(by_op[o]), o)):
            print(f"| {op} | {', '.join(by_op[op])} |")
        print("\n".join(rows))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", help="model cache (default $EMBER_MODEL_CACHE, else ~/.cache/ember/models)")
    ap.add_argument("--only", default="", help="comma-separated model ids")
    ap.add_argument("--markdown", action="store_true", help="print the README's tables")
    args = ap.parse_args(argv)
    try:
        models = fetch_models.select(fetch_models.load_table(), args.only)
    except ValueError as e:
        print(f"op_inventory: {e}", file=sys.stderr)
        return 2
    report(models, fetch_models.cache_dir(args.cache), args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
