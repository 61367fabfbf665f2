#!/usr/bin/env python3
"""Include lint: every #include "..." of a project header must follow the dependency DAG of
docs/DESIGN.md §1 (folder -> folders it may include). Exits 1 listing each crossing include."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RUNTIME_BASE = ["runtime/platform", "runtime/core"]
ALLOWED = {
    "runtime/platform": ["runtime/platform"],
    "runtime/core": RUNTIME_BASE,
    "runtime/program": RUNTIME_BASE + ["runtime/program", "schema"],
    "runtime/kernel": RUNTIME_BASE + ["runtime/program", "runtime/kernel", "schema"],
    # backend → kernel: the capability query speaks KernelKey, and GraphRunner is what host backends embed.
    "runtime/backend": RUNTIME_BASE + ["runtime/program", "runtime/kernel", "runtime/backend", "schema"],
    # interpreter: GraphRunner (kernels + delegate calls) and the host-graph layout backends embed.
    "runtime/interpreter": RUNTIME_BASE + ["runtime/program", "runtime/kernel", "runtime/backend",
                                           "runtime/interpreter", "schema"],
    "runtime/executor": RUNTIME_BASE + ["runtime/program", "runtime/kernel", "runtime/backend", "runtime/interpreter",
                                        "runtime/executor", "schema"],
    "runtime/llm": RUNTIME_BASE + ["runtime/program", "runtime/kernel", "runtime/backend", "runtime/interpreter",
                                   "runtime/executor", "runtime/llm", "schema"],
    "kernels/reference": RUNTIME_BASE + ["runtime/program", "runtime/kernel", "kernels/reference", "schema"],
    "kernels/cpu": RUNTIME_BASE + ["runtime/program", "runtime/kernel", "kernels/cpu", "schema"],
    "kernels": RUNTIME_BASE + ["runtime/program", "runtime/kernel", "kernels", "schema"],
    # backends/<name>: interfaces, views, kernels; never the executor or another backend (added below).
    # tools/common: the tokenizer.json reader, whose TokenizerData the exporter embeds (docs/DESIGN.md §6).
    "exporter": RUNTIME_BASE + ["runtime/program", "runtime/kernel", "kernels/reference", "exporter", "schema",
                                "tools/common"],
}
FREE = ["tools", "tests", "examples", "bench"]  # may include anything
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def owner(path: str):
    parts = path.split("/")
    if parts[0] == "backends" and len(parts) > 2:
        return "backends/" + parts[1]
    if parts[0] in ("runtime", "kernels") and len(parts) > 2:
        key = parts[0] + "/" + parts[1]
        if key in ALLOWED:
            return key
    return parts[0]


def allowed_for(folder: str):
    if folder.startswith("backends/"):
        return RUNTIME_BASE + ["runtime/program", "runtime/kernel", "runtime/backend", "runtime/interpreter", "kernels",
                               "schema", folder]
    return ALLOWED.get(folder)


def main() -> int:
    problems = []
    for path in sorted(ROOT.rglob("*")):
        if path.suffix not in (".h", ".cc", ".cpp", ".cu", ".cuh") or not path.is_file():
            continue
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("build", ".venv", ".git")):
            continue
        folder = owner(rel)
        if folder in FREE:
            continue
        allowed = allowed_for(folder)
        if allowed is None:
            continue
        for include in INCLUDE.findall(path.read_text(errors="replace")):
            if "/" not in include or include.startswith("hwy/"):
                continue  # same-folder or third-party header
            target = include.rsplit("/", 1)[0]
            if (ROOT / include).exists() or include.startswith("schema/"):
                if not any(target == a or target.startswith(a + "/") for a in allowed):
                    problems.append(f"{rel}: includes {include} ({folder} may include only {', '.join(allowed)})")
    for p in problems:
        print(p)
    print(f"check_includes: {len(problems)} crossing include(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
