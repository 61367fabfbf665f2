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
  <kind>/golden.jsonl   for kind in make_tokenizers.KINDS (llama3, qwen2, llama2, mistral, gemma,
                        smollm, gpt2); one JSON object per line:
      {"text": s, "ids": HF encode(s, add_special_tokens=False).ids,
       "decoded": decode(ids, skip_special_tokens=False)   (only when != s),
       "skipped": decode(ids, skip_special_tokens=True)    (only when != decoded)}
    and decode-only cases (random id lists that cut UTF-8 characters, special ids):
      {"decode_ids": ids, "decoded": ..., "skipped": ...}
    The first line is a header: {"kind", "bos": ids that add_special_tokens=True puts first,
    "cases", "decode_cases"}; the script checks encode(s, True).ids == bos + ids for every s. The
    kinds after qwen2 add MORE_HAND_WRITTEN and more random strings (with their special tokens), and
    the SentencePiece kinds decode cases for ByteFallback and Strip (spm_decode_cases).
  sentencepiece_variants.jsonl   the same lines for VARIANTS, edits of the mistral tokenizer.json
                      (Metaspace prepend schemes, split, the Metaspace decoder, unk without byte
                      fallback, ...), each line with "variant": name; the header lists every
                      variant's name, edits, bos and case counts.
  pretokenize.jsonl   {"text": s, "llama3": [...], "qwen2": [...], "gpt2": [...], "gpt2_digits": [...]}:
                      the byte offsets where each piece of HF's pre-tokenizer ends (Split(Llama-3 /
                      Qwen2 regex, Isolated), ByteLevel(use_regex=True), and Sequence[Digits(
                      individual_digits=True), ByteLevel]), no normalizer.
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
KINDS = make_tokenizers.KINDS
GENERATED = [f"{kind}/{name}" for kind in KINDS for name in ("tokenizer.json", "tokenizer_config.json", "golden.jsonl")]
GENERATED += ["sentencepiece_variants.jsonl", "pretokenize.jsonl", "nfc.jsonl"]

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


def random_strings(seed, count, specials=None):
    specials = SPECIALS if specials is None else specials
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
            specials + ["<|", "|>", "<|im_", "_id|>"])
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


# For the kinds after llama3 / qwen2: their special tokens, "▁" and byte-token look-alikes in the
# text, leading / trailing spaces (the SentencePiece prepend and Strip), Digits' Unicode 17.0
# numbers, and long byte-fallback runs.
MORE_HAND_WRITTEN = [
    " leading space", "  two leading", "trailing ", "a \u2581 b", "\u2581", "\u2581\u2581x", "\u2581Hello", " \u2581x",
    "<0x41>", "<0xE4><0xBD><0xA0>", "x<0x0A>y", "<0x+A>", "<unk>", "<s>Hello", "Hello</s>", "<s> Hello", "</s></s>",
    "<s>[INST] What is 2+2? [/INST] 4</s>", "[INST]hi[/INST]", " [INST] a", "[TOOL_CALLS][",
    "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "<pad><eos><mask>", "<start_of_turn> x",
    "a<|endoftext|>b", "<|im_start|>user\nhi<|im_end|>", "<repo_name>ember<file_sep>x.cc",
    "<jupyter_code>print(1)<jupyter_output>", "digits 0123456789 \u0663\u0664 \u00bd\u2153 x1y22z333",
    "\U00011de0\U00011de1\U00016ff5 a\U00016ff4b", "a1b", "1.5e10", " 42", "\t\ttabs\t", "tab\there", "\u00a0nbsp",
    "mixed \u4f60\u597d and \U0001f600\U0001f600 and caf\u00e9", "\U0001f600" * 70, "\u4e00\u4e01\u4e02\u9fff\u3400",
    "\ufffd<0xFF>", "x \n y", " \n ", "end \u2581",
]


def more_strings():
    specials = sorted(set(sum(make_tokenizers.MORE_SPECIALS.values(), [])))
    return MORE_HAND_WRITTEN + random_strings(20261127, 160, specials=specials + [make_tokenizers.META, "<0x41>", " "])


def byte_token_ids(tok, kind):
    """The id of each byte's token (None where there is none): "<0xNN>" in the SentencePiece kinds,
    the byte-level character otherwise."""
    vocab = tok.get_vocab(with_added_tokens=True)
    if kind in make_tokenizers.SPM_KINDS:
        return [vocab.get("<0x%02X>" % b) for b in range(256)]
    return [vocab[chr(make_tokenizers_byte_char(b))] for b in range(256)]


def decode_cases(tok, seed, count, kind="llama3", specials=None):
    """Random id lists: single-byte tokens (UTF-8 cut anywhere), multi-byte tokens, specials."""
    rng = random.Random(seed)
    n = tok.get_vocab_size(with_added_tokens=True)
    byte_ids = [i for i in byte_token_ids(tok, kind) if i is not None]
    high = [i for i in byte_token_ids(tok, kind)[0x80:] if i is not None]
    special = [tok.token_to_id(s) for s in (SPECIALS if specials is None else specials) if tok.token_to_id(s) is not None]
    out = []
    for _ in range(count):
        ids = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            ids.append(rng.choice(high) if r < 0.45 else rng.choice(byte_ids) if r < 0.6 else
                       rng.choice(special) if r < 0.7 else rng.randrange(n))
        out.append(ids)
    return out


def spm_decode_cases(tok, seed, count, specials):
    """Id lists for the ByteFallback and Strip decoders: whole characters as byte tokens (valid
    runs), stray bytes (ill-formed runs), "▁" tokens, space bytes, specials between them (skipping
    them joins two runs), and runs longer than StreamDecoder::kMaxHeldBytes."""
    rng = random.Random(seed)
    vocab = tok.get_vocab(with_added_tokens=True)
    byte_id = byte_token_ids(tok, "llama2")
    meta = sorted(i for t, i in vocab.items() if t.startswith(make_tokenizers.META))
    special = [vocab[s] for s in specials]
    chars = ["\u00e9", "\u4f60", "\u597d", "\U0001f600", "\u20ac", "\u00df", "\ud55c", "\U0001f680", "\u0301", "\t"]
    out = []
    for _ in range(count):
        ids = []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.35:
                ids += [byte_id[b] for b in rng.choice(chars).encode() if byte_id[b] is not None]
            elif r < 0.5:
                ids.append(byte_id[rng.randrange(0x80, 0x100)])
            elif r < 0.65:
                ids.append(rng.choice(meta))
            elif r < 0.8:
                ids.append(rng.choice(special))
            elif r < 0.9:
                ids.append(byte_id[0x20])
            else:
                ids.append(rng.randrange(len(vocab)))
        out.append(ids)
    emoji = [byte_id[b] for b in "\U0001f600".encode()]
    out.append(emoji * 80)                                           # 320 bytes, well-formed
    out.append(emoji * 40 + [special[0]] + emoji * 40)               # one run when the special is skipped
    out.append([byte_id[0x20], byte_id[0x20]] + emoji + [meta[0]])   # Strip meets a byte run
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


def golden_cases(tok, texts, id_lists):
    """The golden lines of `texts` (encode and decode) and of `id_lists` (decode only)."""
    bos = tok.encode("", add_special_tokens=True).ids
    lines = []
    for s in texts:
        ids = tok.encode(s, add_special_tokens=False).ids
        assert tok.encode(s, add_special_tokens=True).ids == bos + ids, s
        case = {"text": s, "ids": ids}
        decoded = tok.decode(ids, skip_special_tokens=False)
        skipped = tok.decode(ids, skip_special_tokens=True)
        if decoded != s:
            case["decoded"] = decoded
        if skipped != decoded:
            case["skipped"] = skipped
        lines.append(case)
    for ids in id_lists:
        case = {"decode_ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)}
        skipped = tok.decode(ids, skip_special_tokens=True)
        if skipped != case["decoded"]:
            case["skipped"] = skipped
        lines.append(case)
    return bos, lines


def golden_for(kind, texts):
    out_dir = os.path.join(DATA, kind)
    make_tokenizers.write_tokenizer(kind, out_dir)
    tok = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
    if kind in ("llama3", "qwen2"):
        cases = decode_cases(tok, 7 if kind == "llama3" else 8, 300)
    else:
        texts = texts + more_strings()
        specials = make_tokenizers.MORE_SPECIALS[kind]
        cases = decode_cases(tok, 9 + KINDS.index(kind), 200, kind, specials)
        if kind in make_tokenizers.SPM_KINDS:
            cases += spm_decode_cases(tok, 19 + KINDS.index(kind), 100, specials)
    bos, lines = golden_cases(tok, texts, cases)
    header = {"kind": kind, "bos": bos, "cases": len(texts), "decode_cases": len(cases)}
    write_lines(os.path.join(out_dir, "golden.jsonl"), [header] + lines)
    return len(texts), len(cases)


# The SentencePiece options the kinds above do not cover, as edits of the mistral tokenizer.json:
# {"path": JSON pointer, "value": v} sets, {"path": ..., "rename": key} renames an object key.
def _meta(scheme, split):
    return {"type": "Metaspace", "replacement": make_tokenizers.META, "prepend_scheme": scheme, "split": split}


def _set(path, value):
    return {"path": path, "value": value}


VARIANT_BASE = "mistral"
VARIANTS = [
    ("metaspace_always_split", [_set("/pre_tokenizer", _meta("always", True)), _set("/decoder", _meta("always", True))]),
    ("metaspace_first_split", [_set("/pre_tokenizer", _meta("first", True)), _set("/decoder", _meta("first", True))]),
    ("metaspace_never", [_set("/pre_tokenizer", _meta("never", False)), _set("/decoder", _meta("never", False))]),
    ("metaspace_legacy", [_set("/pre_tokenizer", {"type": "Metaspace", "replacement": make_tokenizers.META,
                                                  "add_prefix_space": True}),
                          _set("/decoder", {"type": "Metaspace", "replacement": make_tokenizers.META,
                                            "add_prefix_space": True})]),
    ("always_no_strip", [_set("/pre_tokenizer", _meta("always", False)), _set("/decoder", make_tokenizers.SPM_DECODER)]),
    ("strip_two", [_set("/decoder/decoders/3/start", 2)]),
    ("unk_per_char", [_set("/model/byte_fallback", False), _set("/model/fuse_unk", False)]),
    ("unk_fused", [_set("/model/byte_fallback", False)]),
    ("no_unk", [_set("/model/byte_fallback", False), _set("/model/unk_token", None)]),
    ("partial_fallback", [_set("/model/fuse_unk", False), {"path": "/model/vocab/<0xE4>", "rename": "<0xE4_>"},
                          {"path": "/model/vocab/<0x3C>", "rename": "<0x3C_>"}]),
    ("ignore_merges", [_set("/model/ignore_merges", True)]),
    ("whole_without_normalizer", [_set("/pre_tokenizer", None)]),
]


def apply_edits(data, edits):
    """`data` with the edits applied (the C++ test applies them the same way)."""
    data = json.loads(json.dumps(data))
    for edit in edits:
        keys = edit["path"].split("/")[1:]
        obj = data
        for key in keys[:-1]:
            obj = obj[int(key)] if isinstance(obj, list) else obj[key]
        if "rename" in edit:
            renamed = {(edit["rename"] if k == keys[-1] else k): v for k, v in obj.items()}
            obj.clear()
            obj.update(renamed)
        elif isinstance(obj, list):
            obj[int(keys[-1])] = edit["value"]
        else:
            obj[keys[-1]] = edit["value"]
    return data


def variants_golden():
    with open(os.path.join(DATA, VARIANT_BASE, "tokenizer.json"), encoding="utf-8") as f:
        base = json.load(f)
    specials = make_tokenizers.MORE_SPECIALS[VARIANT_BASE]
    # Every other hand-written string (most of the others test regexes and NFC) keeps the file small.
    texts = HAND_WRITTEN[::2] + MORE_HAND_WRITTEN + random_strings(31, 40, specials=specials + [make_tokenizers.META, " "])
    header = {"base": VARIANT_BASE, "variants": []}
    lines = []
    for i, (name, edits) in enumerate(VARIANTS):
        tok = Tokenizer.from_str(json.dumps(apply_edits(base, edits)))
        cases = decode_cases(tok, 40 + i, 30, "llama2", specials) + spm_decode_cases(tok, 60 + i, 30, specials)
        bos, variant_lines = golden_cases(tok, texts, cases)
        header["variants"].append({"name": name, "edits": edits, "bos": bos, "cases": len(texts),
                                   "decode_cases": len(cases)})
        lines += [dict(case, variant=name) for case in variant_lines]
    write_lines(os.path.join(DATA, "sentencepiece_variants.jsonl"), [header] + lines)
    return len(VARIANTS), len(lines)


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
    gpt2_digits = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), gpt2])
    inverse = {chr(make_tokenizers_byte_char(b)): b for b in range(256)}
    lines = []
    for s in texts:
        case = {"text": s}
        for k, split in splits.items():
            pieces = [p for p, _ in split.pre_tokenize_str(s)]
            assert "".join(pieces) == s
            case[k] = piece_ends(pieces, lambda p: p.encode())
        for k, byte_level in (("gpt2", gpt2), ("gpt2_digits", gpt2_digits)):
            pieces = [p for p, _ in byte_level.pre_tokenize_str(s)]
            assert bytes(inverse[c] for c in "".join(pieces)) == s.encode()
            case[k] = piece_ends(pieces, lambda p: p)
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
    for kind in KINDS:
        n, d = golden_for(kind, texts)
        print(f"{kind}: {n} encode cases, {d} decode cases")
    v, n = variants_golden()
    print(f"sentencepiece_variants: {v} variants of {VARIANT_BASE}, {n} cases")
    pretokenize_golden(texts + more_strings())
    print(f"pretokenize: {len(texts) + len(more_strings())} cases")
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
