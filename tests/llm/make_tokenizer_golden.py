#!/usr/bin/env python3
"""Golden data for runtime/llm's tokenizer, from Hugging Face `tokenizers` itself.

    /work/main/.venv/bin/python tests/llm/make_tokenizer_golden.py [--check] [--out DIR --stress N]

--check regenerates into a temporary folder and fails unless the result equals the checked-in files
(ctest runs it: a tokenizers upgrade that changes any id shows up there). --out DIR --stress N writes
the same files plus N more random strings and every text file under --corpus (default: Python's
standard library sources) into DIR, for a long comparison run of the C++ test:
EMBER_LLM_TEST_DATA=DIR build/.../ember_runtime_llm_tokenizer_test.

Rewrites tests/data/llm/ (identical bytes on every run: fixed seeds, sorted output):
  <kind>/tokenizer.json, <kind>/tokenizer_config.json   make_tokenizers.write_tokenizer(kind)
  <kind>/golden.jsonl   for kind in llama3, qwen2; one JSON object per line:
      {"text": s, "ids": HF encode(s, add_special_tokens=False).ids,
       "decoded": decode(ids, skip_special_tokens=False)   (only when != s),
       "skipped": decode(ids, skip_special_tokens=True)    (only when != decoded)}
    and decode-only cases (random id lists that cut UTF-8 characters, special ids):
      {"decode_ids": ids, "decoded": ..., "skipped": ...}
    The first line is a header: {"kind", "bos": ids that add_special_tokens=True puts first,
    "cases", "decode_cases"}; the script checks encode(s, True).ids == bos + ids for every s.
  pretokenize.jsonl   {"text": s, "llama3": [...], "qwen2": [...], "gpt2": [...]}: the byte offsets
                      where each piece of HF's pre-tokenizer ends (Split(Llama-3 / Qwen2 regex,
                      Isolated) and ByteLevel(use_regex=True)), no normalizer.
  nfc.jsonl           {"text": s, "nfc": HF normalizers.NFC() of s (only when != s)}.
"""

import argparse
import filecmp
import glob
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizers  # noqa: E402
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKED_IN = os.path.join(ROOT, "tests", "data", "llm")
DATA = CHECKED_IN  # where the files go (main() may change it)
GENERATED = ["llama3/tokenizer.json", "llama3/tokenizer_config.json", "llama3/golden.jsonl",
             "qwen2/tokenizer.json", "qwen2/tokenizer_config.json", "qwen2/golden.jsonl",
             "pretokenize.jsonl", "nfc.jsonl"]

SPECIALS = make_tokenizers.LLAMA3_SPECIALS + make_tokenizers.QWEN2_SPECIALS

HAND_WRITTEN = [
    "", "a", " ", "Hello world", "Hello, World!", "The quick brown fox jumps over the lazy dog.",
    "It's a test. I'm sure you'd agree they'll see we've done it.",
    "IT'S I'M YOU'D THEY'LL WE'VE YOU'RE DON'T", "It'S i'M yOu'D tHeY'Ll wE'vE yOu'Re dOn'T",
    "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "''s'''t", "'sa 'tis 'rex 'llama 'dog",
    "it\u2019s (curly apostrophe)", "it'\u017f (long s)", "it'\ufb06 (st ligature)", "it'\u1e9e",
    "rock'n'roll", "'", "''", "'x", "x'", "O'Neil's", "l'\u00e9t\u00e9", "'\u00e9t\u00e9'",
    "caf\u00e9", "cafe\u0301", "na\u00efve na\u0131\u0308ve", "\u00c5ngstr\u00f6m A\u030angstro\u0308m",
    "\u212b \u2126 \u212a", "e\u0301\u0301\u0301", "\u0301abc", "a\u0316\u0301\u0300b", "a\u0301\u0316",
    "Ti\u1ebfng Vi\u1ec7t", "Tie\u0302\u0301ng Vie\u0323\u0302t", "\u1e0b\u0323 \u1e0d\u0307 d\u0307\u0323",
    "\u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8 \ud55c\uad6d\uc5b4", "\u1112\u1161\u11ab\u1100\u1173\u11af",
    "\u0958 \u0915\u093c \u2000 \u2001", "\U0001d160 \U0001d15e\U0001d165", "\u0344 \u0340\u0341",
    "\u00bd \u2153 \u00b2 \u00b3 \u2164 \u216b \u2460 \u2776", "\uff11\uff12\uff13\uff14", "\u0663\u0664\u0665 \u096a\u096b",
    "\U0001d7d8\U0001d7d9", "1", "12", "123", "1234", "12345", "1234567", "12,345.67", "3.14159265358979",
    "2024-06-30T12:45:07Z", "0x1F600", "v1.2.3-rc4", "$100", "100%", "-42", "+1 (555) 123-4567",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\ud55c\uad6d\uc5b4 \ubb38\uc7a5",
    "\u4e2d\u6587English\u6df7\u5408123", "\U00020000\U0002a6d6\U00031350", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", "\u05e9\u05dc\u05d5\u05dd",
    "\u0928\u092e\u0938\u094d\u0924\u0947", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\U0001f600", "\U0001f600\U0001f603\U0001f604", "\U0001f44d\U0001f3fd", "\U0001f469\u200d\U0001f4bb",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466", "\U0001f3f3\ufe0f\u200d\U0001f308",
    "\U0001f1eb\U0001f1f7\U0001f1ef\U0001f1f5", "1\ufe0f\u20e3 #\ufe0f\u20e3", "\u2764\ufe0f \u2764", "a\u200db",
    "\u200d", "\ufe0f", "x\U000e0061\U000e007f", "\U0001faf6\U0001fae8",
    "a  b", "a   b", "a    b", "  a", "a  ", "a\tb", "a\t\tb", "\t\tindent", "a\nb", "a\n\nb", "a\r\nb",
    "a\r\n\r\nb", "a\rb", "\r", "\n", "\r\n", "\n\r", "  \n  ", " \n", "\n ", "x \n y", "x  \n\n  y",
    "end   ", "end\n", "end \n", "end\t", "   ", "\t", "\u3000", "a\u3000b", "a\u3000\u3000b", "a\u00a0b",
    "a\u00a0\u00a0b", "a\u2003b", "a\u0085b", "a\u2028b\u2029c", "a\x0bb\x0cc", "a\x1cb\x1d\x1e\x1f",
    "a\u180eb\u200bc\ufeffd", "line1\nline2\r\nline3\rline4", "  \r\n  \r\n", "\n\n\n", "!!!\n\n",
    "hello!!\r\n", " ... ", " !?", "!?", "a!b", " $x", "$hello", "#include <stdio.h>",
    "def f(x):\n    return x ** 2\n", "\tif (a != b) {\n\t\treturn;\n\t}\n",
    "\u0000", "a\u0000b", "\x01\x02\x03\x7f", "\u0080\u0081\u009f", "\u00ad soft hyphen", "\ue000\uf8ff",
    "\ufffe\uffff", "\U0010ffff", "\U000f0000", "\ufffd", "\ufffd\ufffd", "\u00c3\u00a9", "\u00e2\u20ac\u2122",
    "\u00c4\u00a0\u00c4\u0120", "\u0120\u010a\u0120\u0120", "\u0100\u0101\u0102", "\u00ff\u00fe",
    "\U00011f04\U00011f05 Kawi", "\U0001e5d0\U0001e5d1", "\U00010940\U00010941 (17.0)", "\U0001d2c0\U0001d2c1\U0001d2c2\U0001d2c3",
    "\U00016d70\U00016d71\U00016d72\U00016d73", "x\u1ac1\u0316", "x\u0301\u0d3b", "\U00011935\U00011930",
    "<|begin_of_text|>Hello", "Hello<|end_of_text|>", "a<|eot_id|>b", "<|eot_id|><|eot_id|>", "<<|eot_id|>>",
    "<|eot_id", "|eot_id|>", "<|eot_id|", "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "<|reserved_special_token_0|><|reserved_special_token_4|>", "<|reserved_special_token_5|>",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n",
    "<|endoftext|>", "x<|endoftext|>y", "<|im_end|><|im_start|>", " <|im_start|> ", "<|im_start|", "<|im_",
    "\u00e9<|eot_id|>\u0301", "e<|im_end|>\u0301", "caf<|eot_id|>e\u0301", "<|EOT_ID|>", "< |eot_id| >",
    "a" * 300, "9" * 200, " " * 100, "\n" * 50, "\u00e9" * 100, "!" * 150, "ab" * 150, "\U0001f600" * 40,
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
]


def random_strings(seed, count):
    rng = random.Random(seed)
    pool = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") * 3 + list("0123456789") * 2 +
            list(" " * 12) + list("\t\n\r") + list(".,;:!?-_'\"()[]{}<>|/\\@#$%^&*+=~`") +
            ["'s", "'T", "'re", "'LL", "'d", "'\u017f", "\r\n", "\u00a0", "\u3000", "\u2003", "\u0085", "\u000b"] +
            ["\u00e9", "e\u0301", "\u00f1", "n\u0303", "\u00fc", "u\u0308", "\u0301", "\u0323", "\u0302", "\u030a",
             "\u1ac1", "\u0d3b", "\u1100", "\u1161", "\u11a8", "\uac00", "\u0958", "\u212b", "\u00c5", "\u0131"] +
            list("\u4f60\u597d\u4e16\u754c\u65e5\u672c\u8a9e\u306e\u30c6\ud55c\uad6d\u0645\u0631\u05e9\u0928\u0e2a") +
            ["\U0001f600", "\U0001f44d", "\U0001f3fd", "\u200d", "\ufe0f", "\U0001f469\u200d\U0001f4bb", "\u2764",
             "\u00bd", "\u2164", "\u0663", "\uff11", "\U0001d7d8", "\U0001d2c0", "\U00011f04", "\U00010940",
             "\ufffd", "\u00c3", "\u0120", "\u010a", "\u0000", "\u007f", "\u0085", "\ue000", "\U0010ffff"] +
            SPECIALS + ["<|", "|>", "<|im_", "_id|>"])
    out = []
    for _ in range(count):
        n = rng.choice([1, 2, 3, 5, 8, 13, 21, 34])
        out.append("".join(rng.choice(pool) for _ in range(n)))
    # Words with spacing, closer to prose.
    words = "the of and to in is you that it he was for on are as with his they I at be this have from".split()
    words += "caf\u00e9 na\u00efve don't it's I'm we'll 2024 3.14 \u4f60\u597d \U0001f600 hello, world! foo_bar".split()
    for _ in range(count // 2):
        sep = rng.choice([" ", " ", "  ", "\n", "\t", "\r\n", " \n", "   "])
        out.append(sep.join(rng.choice(words) for _ in range(rng.randint(2, 12))) + rng.choice(["", " ", "\n", "  "]))
    return out


def chat_strings():
    convo = [("system", "You are terse."), ("user", "What's 2+2?"), ("assistant", "4."), ("user", "Thanks!  ")]
    llama = "<|begin_of_text|>" + "".join(
        f"<|start_header_id|>{r}<|end_header_id|>\n\n{c.strip()}<|eot_id|>" for r, c in convo)
    qwen = "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in convo) + "<|im_start|>assistant\n"
    return [llama, llama + "<|start_header_id|>assistant<|end_header_id|>\n\n", qwen]


def corpus():
    return HAND_WRITTEN + chat_strings() + random_strings(20240630, 700)


def decode_cases(tok, seed, count):
    """Random id lists: single-byte tokens (UTF-8 cut anywhere), multi-byte tokens, specials."""
    rng = random.Random(seed)
    vocab = tok.get_vocab(with_added_tokens=True)
    n = tok.get_vocab_size(with_added_tokens=True)
    byte_ids = [vocab[chr(make_tokenizers_byte_char(b))] for b in range(256)]
    high = [vocab[chr(make_tokenizers_byte_char(b))] for b in range(0x80, 0x100)]
    special = [tok.token_to_id(s) for s in SPECIALS if tok.token_to_id(s) is not None]
    out = []
    for _ in range(count):
        ids = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            ids.append(rng.choice(high) if r < 0.45 else rng.choice(byte_ids) if r < 0.6 else
                       rng.choice(special) if r < 0.7 else rng.randrange(n))
        out.append(ids)
    return out


def make_tokenizers_byte_char(b):
    printable = 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF
    if printable:
        return b
    return 256 + sum(1 for x in range(b) if not (0x21 <= x <= 0x7E or 0xA1 <= x <= 0xAC or 0xAE <= x <= 0xFF))


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(dumps(line) + "\n")


def golden_for(kind, texts):
    out_dir = os.path.join(DATA, kind)
    make_tokenizers.write_tokenizer(kind, out_dir)
    tok = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
    bos = tok.encode("", add_special_tokens=True).ids
    lines = []
    for s in texts:
        ids = tok.encode(s, add_special_tokens=False).ids
        assert tok.encode(s, add_special_tokens=True).ids == bos + ids, (kind, s)
        case = {"text": s, "ids": ids}
        decoded = tok.decode(ids, skip_special_tokens=False)
        skipped = tok.decode(ids, skip_special_tokens=True)
        if decoded != s:
            case["decoded"] = decoded
        if skipped != decoded:
            case["skipped"] = skipped
        lines.append(case)
    cases = decode_cases(tok, 7 if kind == "llama3" else 8, 300)
    for ids in cases:
        case = {"decode_ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)}
        skipped = tok.decode(ids, skip_special_tokens=True)
        if skipped != case["decoded"]:
            case["skipped"] = skipped
        lines.append(case)
    header = {"kind": kind, "bos": bos, "cases": len(texts), "decode_cases": len(cases)}
    write_lines(os.path.join(out_dir, "golden.jsonl"), [header] + lines)
    return len(texts), len(cases)


def piece_ends(pieces, to_bytes):
    ends, total = [], 0
    for piece in pieces:
        total += len(to_bytes(piece))
        ends.append(total)
    return ends


def pretokenize_golden(texts):
    patterns = {"llama3": make_tokenizers.LLAMA3_PATTERN, "qwen2": make_tokenizers.QWEN2_PATTERN}
    splits = {k: pre_tokenizers.Split(Regex(p), behavior="isolated") for k, p in patterns.items()}
    gpt2 = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    inverse = {chr(make_tokenizers_byte_char(b)): b for b in range(256)}
    lines = []
    for s in texts:
        case = {"text": s}
        for k, split in splits.items():
            pieces = [p for p, _ in split.pre_tokenize_str(s)]
            assert "".join(pieces) == s
            case[k] = piece_ends(pieces, lambda p: p.encode())
        pieces = [p for p, _ in gpt2.pre_tokenize_str(s)]
        assert bytes(inverse[c] for c in "".join(pieces)) == s.encode()
        case["gpt2"] = piece_ends(pieces, lambda p: p)
        lines.append(case)
    write_lines(os.path.join(DATA, "pretokenize.jsonl"), lines)


def nfc_golden(texts):
    nfc = normalizers.NFC()
    rng = random.Random(99)
    marks = [0x300, 0x301, 0x302, 0x303, 0x308, 0x30A, 0x316, 0x323, 0x327, 0x328, 0x331, 0x345, 0x1AC1, 0x0D3B,
             0x1DFA, 0x0898, 0x1E94A, 0x05B0, 0x0E38, 0x0E48, 0x093C, 0x094D, 0x3099, 0x309A, 0x20D0, 0xFE20]
    bases = [ord(c) for c in "aeiouyAEIOUYnNcCsSzZgGkKdDwWxq"] + [0x3B1, 0x3B7, 0x3C9, 0x391, 0x41F, 0x915, 0x309B,
                                                                  0x304B, 0x30CF, 0x1100, 0x1161, 0x11A8, 0xAC00,
                                                                  0xC5, 0xE9, 0x1E0B, 0x212B, 0x2126, 0x0958, 0x0344,
                                                                  0x11935, 0x11930, 0x1D15E, 0x1D165, 0xFB2C, 0xF900]
    extra = []
    for _ in range(2500):
        extra.append("".join(chr(rng.choice(bases if rng.random() < 0.45 else marks)) for _ in range(rng.randint(1, 7))))
    lines = []
    for s in list(texts) + extra:
        case = {"text": s}
        out = nfc.normalize_str(s)
        if out != s:
            case["nfc"] = out
        lines.append(case)
    write_lines(os.path.join(DATA, "nfc.jsonl"), lines)
    return len(lines)


def stress_strings(count, corpus_glob):
    """Long random strings and real text (source files cut into chunks of 1-2000 characters)."""
    out = random_strings(12345, count)
    rng = random.Random(5)
    for path in sorted(glob.glob(corpus_glob, recursive=True)):
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        pos = 0
        while pos < len(text):
            n = rng.randint(1, 2000)
            out.append(text[pos:pos + n])
            pos += n
    return out


def generate(texts):
    for kind in ("llama3", "qwen2"):
        n, d = golden_for(kind, texts)
        print(f"{kind}: {n} encode cases, {d} decode cases")
    pretokenize_golden(texts)
    print(f"pretokenize: {len(texts)} cases")
    print(f"nfc: {nfc_golden(texts)} cases")


def main():
    global DATA
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare a fresh run with the checked-in files")
    parser.add_argument("--out", default=CHECKED_IN)
    parser.add_argument("--stress", type=int, default=0, help="extra random strings (with --out)")
    parser.add_argument("--corpus", default=os.path.join(os.path.dirname(os.__file__), "**", "*.py"))
    args = parser.parse_args()
    texts = corpus()
    assert len(texts) >= 1000, len(texts)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            DATA = tmp
            generate(texts)
            bad = [f for f in GENERATED if not filecmp.cmp(os.path.join(tmp, f), os.path.join(CHECKED_IN, f), shallow=False)]
        if bad:
            print("differs from the checked-in file (rerun tests/llm/make_tokenizer_golden.py): " + ", ".join(bad))
            return 1
        print("all generated files equal the checked-in ones")
        return 0
    DATA = args.out
    if args.stress:
        assert os.path.abspath(args.out) != CHECKED_IN, "--stress writes too much for the checked-in folder"
        texts = texts + stress_strings(args.stress, args.corpus)
    generate(texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
