#!/usr/bin/env python3
"""Tests of scripts/check_doc_paths.py on a small fake repository: each kind of path it checks, the
allowlists, and that a missing path fails with file:line and the path named."""
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check_doc_paths.py"


class CheckDocPathsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.tmp.name) / "repo"
        for path in ("runtime/core/error.h", "runtime/core/status.h", "kernels/cpu/README.md",
                     "toolchains/aarch64-linux-gnu.cmake", "scripts/setup.sh", "backends/null/register.h"):
            (self.root / path).parent.mkdir(parents=True, exist_ok=True)
            (self.root / path).write_text("x\n")
        (self.root / "docs").mkdir()
        (self.root / "docs/DESIGN.md").write_text("# Design\n\n## 1. Layers, folders, libraries\n\n"
                                                   "## 7. Backends\n")
        (self.root.parent / "outside.md").write_text("not in the repository\n")

    def tearDown(self):
        self.tmp.cleanup()

    def run_check(self, readme: str, *extra_args):
        (self.root / "README.md").write_text(textwrap.dedent(readme))
        result = subprocess.run([sys.executable, str(SCRIPT), "--root", str(self.root), *extra_args],
                                capture_output=True, text=True, check=False)
        return result.returncode, result.stdout

    def test_existing_paths_pass(self):
        code, out = self.run_check("""\
            See `runtime/core/error.h`, `runtime/core/` and `scripts/setup.sh`; globs `toolchains/*.cmake`
            and `runtime/core/{error,status}.h`; a placeholder checks the part before it: `backends/<name>/`
            needs `backends/`, `<unit>_test.cc` nothing. Links: [design](docs/DESIGN.md),
            [§1](docs/DESIGN.md#1-layers-folders-libraries), [§7](docs/DESIGN.md#7-backends),
            [site](https://example.com/a/b.md). Not paths: `--input image=x.npy`, `a / b`, `f32`.
            """)
        self.assertEqual(code, 0, out)
        self.assertIn("every named path exists", out)

    def test_missing_backticked_path_fails_naming_file_line_and_path(self):
        code, out = self.run_check("line one\nSee `runtime/core/missing.h` and `kernels/gpu/`.\n")
        self.assertEqual(code, 1)
        self.assertIn("README.md:2: `runtime/core/missing.h` is not a path in the repository", out)
        self.assertIn("README.md:2: `kernels/gpu/` is not a path in the repository", out)
        self.assertIn("2 missing path(s)", out)

    def test_placeholder_prefix_and_globs_must_exist(self):
        code, out = self.run_check("`vulkan/<name>/`, `toolchains/*.json` and `runtime/core/{error,quant}.h`\n")
        self.assertEqual(code, 1)
        self.assertIn("`vulkan/<name>/` is not a path", out)
        self.assertIn("`toolchains/*.json` is not a path", out)
        self.assertNotIn("{error,quant}", out)  # one alternative existing is enough

    def test_bare_file_names_with_checked_extensions(self):
        code, out = self.run_check("`DESIGN.md` is not at the root; `README.md` is; `notes.py` is not.\n")
        self.assertEqual(code, 1)
        self.assertIn("`DESIGN.md` is not a path", out)
        self.assertIn("`notes.py` is not a path", out)
        self.assertNotIn("`README.md`", out)

    def test_paths_outside_the_repository_fail_even_when_they_exist(self):
        code, out = self.run_check("Architecture: `../outside.md`, [link](../outside.md).\n")
        self.assertEqual(code, 1)
        self.assertIn("`../outside.md` is not a path in the repository", out)
        self.assertIn("link target '../outside.md' is not a path in the repository", out)

    def test_missing_link_target_and_anchor_fail(self):
        code, out = self.run_check("[a](docs/STYLE.md) and [b](docs/DESIGN.md#9-build-and-dependencies)\n")
        self.assertEqual(code, 1)
        self.assertIn("README.md:1: link target 'docs/STYLE.md' is not a path in the repository", out)
        self.assertIn("docs/DESIGN.md has no heading with the anchor '#9-build-and-dependencies'", out)

    def test_fenced_code_build_outputs_and_user_files_are_not_checked(self):
        code, out = self.run_check("""\
            ```sh
            runner --program out/missing.pte --input `not/checked.npy`
            ```
            Run `build/release/tools/runner/runner` from `.venv/bin/python`; a checkpoint has
            `config.json` and `tokenizer.json`.
            """)
        self.assertEqual(code, 0, out)

    def test_docs_pages_resolve_from_their_own_folder(self):
        (self.root / "docs/STYLE.md").write_text("See `DESIGN.md`, [DESIGN.md §7](DESIGN.md#7-backends) "
                                                 "and `missing.md`.\n")
        code, out = self.run_check("fine\n")
        self.assertEqual(code, 1)
        self.assertIn("docs/STYLE.md:1: `missing.md` is not a path in the repository", out)
        self.assertNotIn("`DESIGN.md`", out)
        self.assertNotIn("#7-backends", out)


if __name__ == "__main__":
    unittest.main()
