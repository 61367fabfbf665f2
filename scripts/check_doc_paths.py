#!/usr/bin/env python3
"""Doc path lint: every repository path that README.md and docs/*.md name must exist.

Checked: inline code spans that look like a path (no spaces; containing a '/' or ending in .md, .cc,
.h, .py, .sh or .json) and the targets of markdown links (plus their #anchor when the target is a
markdown file). Fenced code blocks are command examples and are not checked. A path resolves from
the repository root or from the markdown file's folder; `*` and `{a,b}` are globs; a `<placeholder>`
component checks only the part before it (`backends/<name>/` needs `backends/`). Build outputs and
other files the docs name but the repository does not hold are in ALLOWED_PREFIXES / ALLOWED_NAMES.

usage: check_doc_paths.py [--root DIR] [FILE.md ...]   (default: README.md and docs/*.md of the repo)
Exits 1 listing each missing path as file:line."""
import argparse
import glob
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Made by the build or by scripts/setup.sh, never committed.
ALLOWED_PREFIXES = ("build/", ".venv/")
# File names the docs use for the user's own files (a Hugging Face checkpoint folder's contents, a
# profile written by runner), not files of this repository.
ALLOWED_NAMES = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
                 "trace.json", "model.safetensors.index.json"}
EXTENSIONS = (".md", ".cc", ".h", ".py", ".sh", ".json")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)\)")
PATH_LIKE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-/*<>{},+]*$")


def expand_braces(path: str):
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    out = []
    for alt in match.group(1).split(","):
        out.extend(expand_braces(path[:match.start()] + alt + path[match.end():]))
    return out


def exists(path: str, base: pathlib.Path, root: pathlib.Path) -> bool:
    if "<" in path:  # a placeholder: the part before the component that holds it must exist
        path = path[:path.index("<")]
        path = path[:path.rfind("/") + 1] if "/" in path else ""
        if not path:
            return True
    for candidate in expand_braces(path):
        for folder in (root, base):
            # Only what lies inside the repository counts (`../shared/x.md` may exist, but not for a user).
            if any(pathlib.Path(m).resolve().is_relative_to(root) for m in glob.glob(str(folder / candidate))):
                return True
    return False


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(md_file: pathlib.Path):
    result, fenced = set(), False
    for line in md_file.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            result.add(slug(line.lstrip("#")))
    return result


def is_path_like(span: str) -> bool:
    if not PATH_LIKE.match(span) or span.startswith(("-", "~")):
        return False
    return "/" in span or span.endswith(EXTENSIONS)


def check_file(md_file: pathlib.Path, root: pathlib.Path):
    problems = []
    base = md_file.parent
    rel_name = md_file.relative_to(root).as_posix() if md_file.is_relative_to(root) else str(md_file)
    fenced = False
    for number, line in enumerate(md_file.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            if not path:
                path = md_file.name
            resolved = (base / path).resolve()
            if not resolved.exists() or not resolved.is_relative_to(root):
                problems.append(f"{rel_name}:{number}: link target '{target}' is not a path in the repository "
                                f"(resolved from the file's folder)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{rel_name}:{number}: link '{target}': {path} has no heading "
                                f"with the anchor '#{anchor}'")
        for _, span in CODE_SPAN.findall(LINK.sub("", line)):
            span = span.strip()
            if not is_path_like(span):
                continue
            path = span[2:] if span.startswith("./") else span
            if path.startswith(ALLOWED_PREFIXES) or pathlib.PurePosixPath(path).name in ALLOWED_NAMES:
                continue
            if not exists(path, base, root):
                problems.append(f"{rel_name}:{number}: `{span}` is not a path in the repository "
                                "(tried from its root and from the file's folder)")
    return problems


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path, default=ROOT)
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    args = parser.parse_args(argv)
    root = args.root.resolve()
    files = [f.resolve() for f in args.files] or [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    problems = []
    for md_file in files:
        if not md_file.is_file():
            problems.append(f"{md_file}: no such markdown file")
            continue
        problems.extend(check_file(md_file, root))
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_doc_paths: {len(problems)} missing path(s) in {len(files)} file(s)")
        return 1
    print(f"check_doc_paths: {len(files)} file(s), every named path exists")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
