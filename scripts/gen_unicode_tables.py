#!/usr/bin/env python3
"""Generates runtime/llm/unicode_tables.cc: the Unicode data the tokenizer's pre-tokenizer regexes
(\\p{L}, \\p{N}, \\s) and its NFC normalizer need, as compact sorted tables.

    .venv/bin/python scripts/gen_unicode_tables.py            # rewrites runtime/llm/unicode_tables.cc
    .venv/bin/python scripts/gen_unicode_tables.py --check-hf # also compares with HF tokenizers
    .venv/bin/python scripts/gen_unicode_tables.py --check --check-hf  # ctest: file up to date + HF

Needs the PyPI package unicodedata2==16.0.0 (requirements.txt) and perl; without unicodedata2 the
script exits with status 77 (ctest's "skipped").

The goal is bit-compatibility with Hugging Face `tokenizers` 0.22, whose Unicode components are
on DIFFERENT Unicode versions (found by probing, and confirmed exhaustively by --check-hf):

  * Regexes run on Oniguruma (Rust crate `onig` 6.5.1, bundled Oniguruma 6.9.10): Unicode 16.0.0.
    Letters / numbers assigned in 15.0-16.0 (Kawi, Kaktovik numerals, CJK Ext. H/I, Garay, ...)
    are \\p{L} / \\p{N}; those of 17.0 are not. The tables take General_Category from the PyPI
    package `unicodedata2` 16.0.0 (Python 3.11's own unicodedata is 14.0.0 and would misclassify
    the 15.0-16.0 additions). \\s is White_Space (PropList.txt, unchanged since 6.3; U+001C-001F,
    U+180E, U+200B and U+FEFF are NOT \\s although Python's str.isspace() says so for some).
  * Rust's char::is_numeric (the Digits pre-tokenizer of SmolLM-style tokenizers) is Unicode 17.0:
    \\p{N} of 16.0 plus the 17.0 additions listed in NUMERIC_17_ADDITIONS.
  * NFC runs on the crate `unicode-normalization-alignments` 0.1.12, whose tables are Unicode
    9.0.0: a combining mark or precomposed character assigned after 9.0 is treated as an
    unassigned starter (ccc 0, no decomposition). So the NFC tables here are the canonical
    decompositions, combining classes and composition exclusions of `unicodedata2` restricted to
    the code points present in Unicode 9.0 (perl's Unicode::UCD `Present_In=9.0`). Unicode's
    normalization stability policy makes this restriction exact: those properties never change
    for an assigned code point.

So "NFC" in Ember means what HF computes, which differs from Python's
unicodedata.normalize('NFC', s) only for strings containing characters assigned after Unicode 9.0
(for strings of 9.0 characters both agree, by the same stability policy).
"""

import argparse
import os
import random
import subprocess
import sys
import unicodedata as py_unicodedata

try:
    import unicodedata2 as ucd
except ImportError:
    print("gen_unicode_tables.py needs the PyPI package unicodedata2==16.0.0 (requirements.txt)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "runtime", "llm", "unicode_tables.cc")

REGEX_UNICODE_VERSION = "16.0.0"
NFC_UNICODE_VERSION = "9.0"

# PropList.txt White_Space (Unicode 6.3 and later, 16.0 included).
WHITE_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
               (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
               (0x3000, 0x3000)]

# Rust's char::is_numeric, which HF's Digits pre-tokenizer splits with, follows the Unicode of the
# Rust toolchain that built tokenizers 0.22: 17.0, one version past Oniguruma's. Its General_Category
# N is 16.0's plus these 17.0 additions (Tolong Siki digits, U+16FF4-16FF6), which unicodedata2 16.0
# cannot list; found by probing every code point and confirmed by --check-hf.
NUMERIC_17_ADDITIONS = [(0x11DE0, 0x11DE9), (0x16FF4, 0x16FF6)]

S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
S_COUNT = L_COUNT * V_COUNT * T_COUNT


def code_points():
    return (c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def ranges_of(pred):
    out, start = [], None
    for c in range(0x110001):
        if c < 0x110000 and pred(c):
            if start is None:
                start = c
        elif start is not None:
            out.append((start, c - 1))
            start = None
    return out


def present_in_9_0():
    """Code points assigned in Unicode 9.0, from perl's Unicode::UCD (any perl >= 5.26)."""
    script = 'use Unicode::UCD qw(prop_invlist); print join(",", prop_invlist("Present_In=9.0"))'
    inv = [int(x) for x in subprocess.check_output(["perl", "-e", script], text=True).split(",")]
    present = bytearray(0x110000)
    for i in range(0, len(inv), 2):
        end = inv[i + 1] if i + 1 < len(inv) else 0x110000
        present[inv[i]:end] = b"\x01" * (end - inv[i])
    return present


def nfc_data():
    present = present_in_9_0()
    ccc = {}
    decomp = {}  # one level: cp -> (first, second or 0)
    for c in code_points():
        if not present[c]:
            continue
        ch = chr(c)
        k = ucd.combining(ch)
        if k:
            ccc[c] = k
        if S_BASE <= c < S_BASE + S_COUNT:
            continue  # Hangul syllables are algorithmic
        d = ucd.decomposition(ch)
        if d and not d.startswith("<"):
            parts = [int(x, 16) for x in d.split()]
            assert len(parts) in (1, 2) and all(present[p] for p in parts), hex(c)
            decomp[c] = (parts[0], parts[1] if len(parts) == 2 else 0)
    # Primary composites: pair decompositions whose character survives NFC (i.e. not in
    # Full_Composition_Exclusion: not excluded, not a non-starter decomposition).
    comp = {}
    for c, (a, b) in decomp.items():
        if b and ucd.normalize("NFC", chr(c)) == chr(c):
            assert (a, b) not in comp
            comp[(a, b)] = c
    return ccc, decomp, comp, present


def full_decomposition(c, decomp):
    if S_BASE <= c < S_BASE + S_COUNT:
        s = c - S_BASE
        out = [L_BASE + s // (V_COUNT * T_COUNT), V_BASE + (s % (V_COUNT * T_COUNT)) // T_COUNT]
        if s % T_COUNT:
            out.append(T_BASE + s % T_COUNT)
        return out
    if c not in decomp:
        return [c]
    a, b = decomp[c]
    return full_decomposition(a, decomp) + (full_decomposition(b, decomp) if b else [])


def reference_nfc(s, ccc, decomp, comp):
    """The algorithm runtime/llm/unicode.cc implements, on these tables (for --check-hf)."""
    cps = [d for ch in s for d in full_decomposition(ord(ch), decomp)]
    i = 0
    while i < len(cps):  # canonical ordering: stable sort of each run of non-starters
        if ccc.get(cps[i], 0) == 0:
            i += 1
            continue
        j = i
        while j < len(cps) and ccc.get(cps[j], 0) != 0:
            j += 1
        cps[i:j] = sorted(cps[i:j], key=lambda x: ccc[x])
        i = j
    out, starter, last_ccc = [], -1, 0
    for c in cps:
        k = ccc.get(c, 0)
        if starter >= 0 and (len(out) - 1 == starter or (last_ccc != 0 and last_ccc < k)):
            a = out[starter]
            r = None
            if L_BASE <= a < L_BASE + L_COUNT and V_BASE <= c < V_BASE + V_COUNT:
                r = S_BASE + ((a - L_BASE) * V_COUNT + (c - V_BASE)) * T_COUNT
            elif (S_BASE <= a < S_BASE + S_COUNT and (a - S_BASE) % T_COUNT == 0
                  and T_BASE < c < T_BASE + T_COUNT):
                r = a + (c - T_BASE)
            else:
                r = comp.get((a, c))
            if r is not None:
                out[starter] = r
                continue
        if k == 0:
            starter = len(out)
        out.append(c)
        last_ccc = k
    return "".join(chr(c) for c in out)


def emit(out, name, ctype, rows, per_line, fmt):
    out.append(f"const {ctype} {name}[] = {{")
    for i in range(0, len(rows), per_line):
        out.append("    " + " ".join(fmt(r) + "," for r in rows[i:i + per_line]))
    out.append("};")
    out.append(f"const size_t {name[:-1] if name.endswith('s') else name}Count = {len(rows)};")
    out.append("")


def generate():
    assert ucd.unidata_version == REGEX_UNICODE_VERSION, ucd.unidata_version
    letters = ranges_of(lambda c: ucd.category(chr(c))[0] == "L")
    numbers = ranges_of(lambda c: ucd.category(chr(c))[0] == "N")
    ccc, decomp, comp, present = nfc_data()
    ccc_ranges = []
    for c in sorted(ccc):
        if ccc_ranges and ccc_ranges[-1][1] == c - 1 and ccc_ranges[-1][2] == ccc[c]:
            ccc_ranges[-1][1] = c
        else:
            ccc_ranges.append([c, c, ccc[c]])
    decomps = sorted((c, a, b) for c, (a, b) in decomp.items())
    comps = sorted((a, b, c) for (a, b), c in comp.items())
    # Bounds the C++ scratch sizes rely on (runtime/llm/unicode.h).
    max_cps_per_byte = max(len(full_decomposition(c, decomp)) / len(chr(c).encode()) for c in decomp)
    assert max_cps_per_byte <= 2, max_cps_per_byte
    for c in decomp:
        full = "".join(chr(x) for x in full_decomposition(c, decomp))
        assert len(full.encode()) <= 3 * len(chr(c).encode()), hex(c)
    for (a, b), c in comp.items():
        assert len(chr(c).encode()) <= len(chr(a).encode()) + len(chr(b).encode()), hex(c)
        assert b >= 0x300, hex(c)  # strings below U+0300 are NFC already (kNfcQuickLimit)
    for c in range(0x300):
        assert ucd.normalize("NFC", chr(c)) == chr(c) and c not in ccc, hex(c)

    h = lambda x: f"0x{x:X}"  # noqa: E731
    out = [
        "// GENERATED by scripts/gen_unicode_tables.py -- do not edit; rerun the script instead.",
        f"// \\p{{L}}, \\p{{N}}: General_Category of Unicode {REGEX_UNICODE_VERSION} (PyPI unicodedata2 "
        f"{ucd.unidata_version}),",
        "// the version of the Oniguruma that HF tokenizers 0.22 runs its regexes on. \\s: White_Space.",
        "// kNumericExtraRanges: the Unicode 17.0 numbers Rust's char::is_numeric adds (HF's Digits).",
        f"// NFC: canonical decompositions, combining classes and composition exclusions of the code",
        f"// points present in Unicode {NFC_UNICODE_VERSION} (the tables of unicode-normalization-alignments "
        "0.1.12, HF's NFC).",
        "// Hangul syllables are algorithmic and not listed. All tables are sorted for binary search.",
        "#include \"runtime/llm/unicode_tables.h\"",
        "",
        "namespace ember::llm {",
        "",
    ]
    emit(out, "kLetterRanges", "CodePointRange", letters, 6, lambda r: f"{{{h(r[0])}, {h(r[1])}}}")
    emit(out, "kNumberRanges", "CodePointRange", numbers, 6, lambda r: f"{{{h(r[0])}, {h(r[1])}}}")
    emit(out, "kNumericExtraRanges", "CodePointRange", NUMERIC_17_ADDITIONS, 6,
         lambda r: f"{{{h(r[0])}, {h(r[1])}}}")
    emit(out, "kWhiteSpaceRanges", "CodePointRange", WHITE_SPACE, 6, lambda r: f"{{{h(r[0])}, {h(r[1])}}}")
    emit(out, "kCombiningClassRanges", "CombiningClassRange", ccc_ranges, 5,
         lambda r: f"{{{h(r[0])}, {h(r[1])}, {r[2]}}}")
    emit(out, "kDecompositions", "Decomposition", decomps, 4,
         lambda r: f"{{{h(r[0])}, {h(r[1])}, {h(r[2])}}}")
    emit(out, "kCompositions", "Composition", comps, 4, lambda r: f"{{{h(r[0])}, {h(r[1])}, {h(r[2])}}}")
    out.append("}  // namespace ember::llm")
    text = "\n".join(out) + "\n"
    return text, (letters, numbers, ccc, decomp, comp, present)


def check_hf(tables):
    """Compares the tables with HF tokenizers itself: every code point's class, and NFC."""
    from tokenizers import Regex, normalizers, pre_tokenizers
    letters, numbers, ccc, decomp, comp, present = tables
    every = "".join(chr(c) for c in code_points())

    def removed_by(pattern, ranges):
        split = pre_tokenizers.Split(Regex(pattern), behavior="removed")
        kept = set()
        for piece, _ in split.pre_tokenize_str(every):
            kept.update(ord(ch) for ch in piece)
        expect = set()
        for a, b in ranges:
            expect.update(c for c in range(a, b + 1) if not 0xD800 <= c <= 0xDFFF)
        got = set(code_points()) - kept
        bad = sorted(got ^ expect)
        assert not bad, f"{pattern}: {len(bad)} code points differ, first {[hex(c) for c in bad[:10]]}"
        print(f"  {pattern}: {len(got)} code points, same as HF")

    removed_by(r"\p{L}", letters)
    removed_by(r"\p{N}", numbers)
    removed_by(r"\s", WHITE_SPACE)

    # Digits(individual_digits=True) isolates each char::is_numeric character: \p{N} plus the 17.0 additions.
    digits = pre_tokenizers.Digits(individual_digits=True)
    numeric = set()
    cps = list(code_points())
    for i in range(0, len(cps), 50000):
        for piece, _ in digits.pre_tokenize_str("".join("a" + chr(c) for c in cps[i:i + 50000])):
            if piece != "a" and len(piece) == 1:
                numeric.add(ord(piece))
    expect = set()
    for a, b in numbers + NUMERIC_17_ADDITIONS:
        expect.update(range(a, b + 1))
    bad = sorted(numeric ^ expect)
    assert not bad, f"Digits: {len(bad)} code points differ, first {[hex(c) for c in bad[:10]]}"
    print(f"  Digits: {len(numeric)} numeric code points, same as HF")

    nfc = normalizers.NFC()
    cases = [chr(c) for c in code_points()]
    marks = sorted(set(c for c in code_points() if ucd.combining(chr(c))))
    cases += ["x\u0301" + chr(c) for c in marks] + ["x" + chr(c) + "\u0316" for c in marks]
    cases += [chr(a) + chr(b) for a in range(0x1100, 0x1113) for b in range(0x1161, 0x1176)]
    cases += ["\uac00" + chr(t) for t in range(0x11A6, 0x11C4)] + ["\uac01\u11a8", "\u1100\u0301\u1161"]
    for c in code_points():  # every pair decomposition, recomposed (incl. post-9.0 ones)
        d = ucd.decomposition(chr(c))
        if d and not d.startswith("<") and len(d.split()) == 2:
            a, b = (chr(int(x, 16)) for x in d.split())
            cases += [a + b, a + "\u0323" + b, a + "\u0300" + b]
    rng = random.Random(9)
    starters = [ord(x) for x in "aeiouAEIOUsSnNcCzZ"] + [c for c in decomp][:400] + [0x1100, 0x1161, 0x11A8]
    pool = starters + marks
    for _ in range(30000):
        cases.append("".join(chr(rng.choice(pool)) for _ in range(rng.randint(1, 8))))
    bad = [s for s in cases if nfc.normalize_str(s) != reference_nfc(s, ccc, decomp, comp)]
    assert not bad, f"NFC differs from HF for {len(bad)} strings, e.g. {[hex(ord(x)) for x in bad[0]]}"
    print(f"  NFC: {len(cases)} strings, same as HF")
    # Stability: on strings of Unicode 9.0 characters the tables also agree with unicodedata's NFC
    # (Python's own 14.0 and unicodedata2's 16.0).
    old = [s for s in cases if all(present[ord(ch)] for ch in s)]
    for norm in (py_unicodedata.normalize, ucd.normalize):
        bad = [s for s in old if norm("NFC", s) != reference_nfc(s, ccc, decomp, comp)]
        assert not bad, f"NFC differs from unicodedata for {[hex(ord(x)) for x in bad[0]]}"
    print(f"  NFC: {len(old)} of them use only Unicode 9.0 characters: same as unicodedata.normalize")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check-hf", action="store_true", help="compare the tables with HF tokenizers")
    parser.add_argument("--check", action="store_true", help="fail unless --out already holds this output")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    text, tables = generate()
    if args.check:
        with open(args.out, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{args.out} is out of date: rerun scripts/gen_unicode_tables.py")
                return 1
        print(f"{args.out} is up to date")
    else:
        with open(args.out, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        print(f"wrote {args.out}: {text.count(chr(10))} lines")
    if args.check_hf:
        check_hf(tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
