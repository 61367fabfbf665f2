#!/usr/bin/env python3
"""runner's made-up inputs (issue 17): an integer input that indexes a table draws below the table's
size, other integer inputs draw 0 or 1, and every made-up input is announced with its range; an
output named with '/' is written under a safe file name with the mapping printed.

usage: runner_inputs_test.py EXPORTER RUNNER   (needs onnx and numpy: the project venv)
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(path):
    # ids [2, 8] i64 -> Cast(i32) -> Reshape [16] -> Gather(emb [37, 4]) ; mask [2, 8] i64 -> Cast f32 ;
    # y = sum of both (broadcast through reshapes); out "enc/y:0".
    emb = numpy_helper.from_array(np.linspace(-1, 1, 37 * 4, dtype=np.float32).reshape(37, 4), "emb")
    shape16 = numpy_helper.from_array(np.array([16], dtype=np.int64), "shape16")
    shape164 = numpy_helper.from_array(np.array([16, 1], dtype=np.int64), "shape161")
    nodes = [
        helper.make_node("Cast", ["ids"], ["ids32"], to=TensorProto.INT32),
        helper.make_node("Reshape", ["ids32", "shape16"], ["flat"]),
        helper.make_node("Gather", ["emb", "flat"], ["rows"], axis=0),
        helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Reshape", ["maskf", "shape161"], ["mask2"]),
        helper.make_node("Mul", ["rows", "mask2"], ["enc/y:0"]),
    ]
    g = helper.make_graph(nodes, "ids", [
        helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 8]),
        helper.make_tensor_value_info("mask", TensorProto.INT64, [2, 8]),
    ], [helper.make_tensor_value_info("enc/y:0", TensorProto.FLOAT, [16, 4])], [emb, shape16, shape164])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)


def main():
    exporter, runner = sys.argv[1], sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path, pte = os.path.join(tmp, "ids.onnx"), os.path.join(tmp, "ids.pte")
        model(onnx_path)
        subprocess.run([exporter, onnx_path, "-o", pte, "--quiet"], check=True)
        out_dir = os.path.join(tmp, "new", "out")
        p = subprocess.run([runner, "--program", pte, "--output-dir", out_dir, "--seed", "3"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"runner failed: {p.stderr}")
        out = p.stdout
        m = re.search(r"^input ids: random i64 \[2, 8\] in \[0, 37\) \(indices of gather '([^']*)' \(37 rows\)\)$",
                      out, re.M)
        if not m:
            failures.append(f"no ids range line in:\n{out}")
        if not re.search(r"^input mask: random i64 \[2, 8\] in \[0, 2\) \(no gather or embedding reads it: "
                         r"0 or 1 \(a mask or a type id\)\)$", out, re.M):
            failures.append(f"no mask range line in:\n{out}")
        safe = os.path.join(out_dir, "enc_y_0.npy")
        if f"    wrote {safe} (output 'enc/y:0': its name is not a plain file name)" not in out:
            failures.append(f"no mapping line for 'enc/y:0' in:\n{out}")
        elif os.path.exists(safe):
            y = np.load(safe)
            # Every row is a table row (ids in range) times 0 or 1: finite, and within the table's values.
            if y.shape != (16, 4) or not np.all(np.isfinite(y)) or np.abs(y).max() > 1.0:
                failures.append(f"output {y.shape} out of range: {y}")
        else:
            failures.append(f"{safe} missing")
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
