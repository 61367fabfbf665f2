#!/usr/bin/env python3
"""Small BPE tokenizers shaped exactly like the Llama-3, Qwen2, Llama-2, Mistral, Gemma, SmolLM and
GPT-2 releases.

`write_tokenizer(kind, out_dir)` trains a BPE (about 1,000-1,500 ids) with Hugging Face `tokenizers` on
the deterministic corpus below and writes `tokenizer.json` and `tokenizer_config.json` into
`out_dir`. Everything except the vocabulary and merges has the structure of the real releases
(normalizer, pre-tokenizer, model options, post-processor, decoder, special tokens). Llama-3 and Qwen2
(meta-llama/Meta-Llama-3-8B-Instruct and Qwen/Qwen2-7B-Instruct) were checked against their public
tokenizer.json / tokenizer_config.json:

  llama3: no normalizer; pre-tokenizer Sequence[Split(<regex with \\p{N}{1,3}>, Isolated),
          ByteLevel(add_prefix_space=false, trim_offsets=true, use_regex=false)]; BPE with
          ignore_merges=true; post-processor Sequence[ByteLevel, TemplateProcessing(<|begin_of_text|> $A)];
          ByteLevel decoder; the first ten special ids of Llama-3 in their order (128000-128009:
          begin/end_of_text, reserved 0-3, start/end_header_id, reserved 4, eot_id).
  qwen2:  NFC normalizer; the same Split regex with \\p{N} (single digits); ByteLevel pre-tokenizer,
          post-processor and decoder; BPE with ignore_merges=false; <|endoftext|>, <|im_start|>,
          <|im_end|>; no BOS.

Special tokens get the ids after the trained vocabulary, as in the releases. The files are
deterministic: the same bytes on every run (json.dumps with sorted vocab by id, fixed corpus).

The SentencePiece-style BPE kinds follow what transformers' convert_slow_tokenizer writes
(LlamaConverter, GemmaConverter), checked against copies of that converter and of Gemma tokenizer.json
headers in public code, not against the released files themselves (no downloads here). Vocabulary:
the special tokens first, then the 256 byte tokens "<0x00>".."<0xFF>", then the trained pieces; the
alphabet is limited (TRAINED_ALPHABET) so that rare characters (most CJK, emoji) take byte fallback:

  llama2:  Llama-2 / Mistral v0.1 ("legacy"): normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no
           pre-tokenizer, BPE with unk_token <unk>, fuse_unk, byte_fallback; post-processor
           TemplateProcessing(<s> $A); decoder Sequence[Replace("▁", " "), ByteFallback, Fuse,
           Strip(" ", 1, 0)]; <unk>, <s>, </s> at ids 0-2; merges as "a b" strings.
  mistral: the non-legacy layout (LlamaConverter with legacy=False, as Mistral v0.3 ships it): no
           normalizer, pre-tokenizer Metaspace("▁", prepend_scheme "first", split false); the rest as
           llama2, plus the control tokens [INST], [/INST], [TOOL_CALLS] at ids 3-5.
  gemma:   normalizer Replace(" ", "▁"), pre-tokenizer Split(" ", MergedWithPrevious) (a no-op after
           it), BPE as llama2 with "\t" in place of "<0x09>"; TemplateProcessing(<bos> $A); decoder
           Sequence[Replace("▁", " "), ByteFallback, Fuse] (no Strip); <pad>, <eos>, <bos>, <unk>,
           <mask>, <start_of_turn>, <end_of_turn> at ids 0-6.

and the byte-level ones (HuggingFaceTB/SmolLM2-135M-Instruct, openai-community/gpt2):

  smollm:  no normalizer; pre-tokenizer Sequence[Digits(individual_digits=true), ByteLevel(use_regex=
           true)]; post-processor and decoder ByteLevel; BPE with null prefixes; 17 special tokens
           (<|endoftext|>, <|im_start|>, <|im_end|>, <repo_name>, ...) at ids 0-16; ChatML template.
  gpt2:    pre-tokenizer ByteLevel(use_regex=true) alone; BPE with "" prefixes; <|endoftext|> the last
           id, an added token with normalized=true.

  /work/main/.venv/bin/python tests/llm/make_tokenizers.py --kind llama3 --out DIR
"""

import argparse
import collections
import json
import os
import random
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

# The Split patterns of the releases (tiktoken's cl100k pattern; Qwen2 splits digits one by one).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

LLAMA3_SPECIALS = [
    "<|begin_of_text|>", "<|end_of_text|>",
    "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|reserved_special_token_2|>", "<|reserved_special_token_3|>",
    "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_4|>", "<|eot_id|>",
]
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# The chat templates of Meta-Llama-3-8B-Instruct and Qwen2-7B-Instruct, verbatim.
LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
QWEN2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

TRAINED_VOCAB = {"llama3": 1200, "qwen2": 1150}  # ids before the special tokens
KINDS = ["llama3", "qwen2", "llama2", "mistral", "gemma", "smollm", "gpt2"]

_PROSE = """\
The quick brown fox jumps over the lazy dog. It's a sentence that we've all seen, and they'll see it
again; I'm sure you'd agree that the dog doesn't mind. WE'RE SHOUTING NOW, AREN'T WE? You'Ve Been Warned.
In the beginning the runtime loaded the program, checked every header and every offset, and only then
did it run. Tokenizers split text into words, numbers and punctuation before merging bytes into tokens.
A paged attention kernel reads keys and values from blocks of a shared pool; the scheduler admits new
requests, preempts old ones and recomputes them later. Memory is planned ahead of time, so the hot path
never calls malloc. "Quotes", (parentheses), [brackets], {braces} -- dashes... and ellipses!
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 65536 3.14159 2.71828 1,000,000 2024-06-30 12:45:07.
"""

_CODE = """\
def encode(self, text: str) -> list[int]:
    ids = []
    for word in self.pre_tokenize(text):
        ids.extend(self.bpe(word))
    return ids

int main(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::printf("%d: %s\\n", i, argv[i]);
  }
  return 0;
}

\tif (x != nullptr && y >= 0) { return x->value + y * 2; }
const auto result = co_await fetch("https://example.com/api?q=1&n=20");
SELECT name, count(*) FROM users WHERE age > 30 GROUP BY name;
"""

_ACCENTS = """\
Café, naïve, résumé, façade, jalapeño, Ångström, über, Straße, crème brûlée, São Paulo, Dvořák,
Łódź, Ærøskøbing, déjà vu, coöperate, piñata, Übermensch, élève, garçon, fiancée, señor, Zürich.
Ελληνικά γράμματα: άλφα, βήτα, γάμμα. Русский текст: привет, мир, как дела? Türkçe: ığüşöç İstanbul.
"""

_CJK = """\
你好，世界！今天天气很好，我们去公园散步吧。机器学习和自然语言处理是人工智能的重要分支。
日本語のテキスト：こんにちは、世界。東京は日本の首都です。カタカナとひらがなと漢字。
한국어 문장: 안녕하세요, 세계! 서울은 한국의 수도입니다. 한글은 아름답습니다.
"""

_EMOJI = """\
Emoji: 😀 😃 😄 😁 😆 🚀 🌍 🎉 ❤️ 👍🏽 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷 🇯🇵 ✨ 🔥 💡 ✅ ❌ ⚠️ ☕ 🍕
Symbols: ∑ ∫ √ ∞ ≠ ≤ ≥ → ← ↔ © ® ™ € £ ¥ ° ± × ÷ § ¶ • … ½ ¼ ¾ ² ³ Ⅻ ① ② ③ ٣ ٤ ५ ६
"""

_WHITESPACE = "a  b   c    d\t\te\n\nf\r\ng \r\n\r\nh   \n  i\u00a0j\u3000k\u2003l    \n\n\n    end   \n"


def corpus():
    """The training corpus: fixed text plus deterministic mixtures of its words (seeded)."""
    base = [_PROSE, _CODE, _ACCENTS, _CJK, _EMOJI, _WHITESPACE]
    lines = []
    for text in base:
        lines.extend([text] * 3)
    words = " ".join(base).split()
    rng = random.Random(20240630)
    for _ in range(600):
        n = rng.randint(3, 14)
        sep = rng.choice([" ", " ", " ", "  ", "\t", "\n", ", ", ". "])
        lines.append(sep.join(rng.choice(words) for _ in range(n)))
        lines.append(str(rng.randint(0, 10 ** rng.randint(1, 9))))
    return lines


def _build(kind):
    if kind == "llama3":
        pattern, specials = LLAMA3_PATTERN, LLAMA3_SPECIALS
        normalizer = None
    elif kind == "qwen2":
        pattern, specials = QWEN2_PATTERN, QWEN2_SPECIALS
        normalizer = normalizers.NFC()
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r} (llama3 | qwen2)")
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=TRAINED_VOCAB[kind], min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok, pattern, specials


def _byte_level(add_prefix_space, trim_offsets, use_regex):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": trim_offsets,
            "use_regex": use_regex}


def _tokenizer_json(kind, tok, pattern, specials):
    """The release-shaped tokenizer.json as a dict (vocab and merges from the trained model)."""
    model = json.loads(tok.to_str())["model"]
    vocab = model["vocab"]
    n = len(vocab)
    assert sorted(vocab.values()) == list(range(n)), "trained ids are not dense"
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in model["merges"]]
    added = [{"id": n + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(specials)]
    split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
    if kind == "llama3":
        bos = specials[0]
        normalizer = None
        pre = {"type": "Sequence", "pretokenizers": [split, _byte_level(False, True, False)]}
        post = {"type": "Sequence", "processors": [
            _byte_level(True, False, True),
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {bos: {"id": bos, "ids": [n], "tokens": [bos]}}}]}
        decoder = _byte_level(True, True, True)
        bpe_extra = {"continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": True}
    else:
        normalizer = {"type": "NFC"}
        pre = {"type": "Sequence", "pretokenizers": [split, _byte_level(False, False, False)]}
        post = _byte_level(False, False, False)
        decoder = _byte_level(False, False, False)
        bpe_extra = {"continuing_subword_prefix": "", "end_of_word_suffix": "",
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False}
    bpe = {"type": "BPE", "dropout": None, "unk_token": None, **bpe_extra,
           "vocab": dict(sorted(vocab.items(), key=lambda kv: kv[1])), "merges": merges}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post,
            "decoder": decoder, "model": bpe}


def _tokenizer_config(kind, specials, first_special_id):
    decoder = {str(first_special_id + i): {"content": s, "lstrip": False, "normalized": False,
                                           "rstrip": False, "single_word": False, "special": True}
               for i, s in enumerate(specials)}
    if kind == "llama3":
        return {"add_bos_token": True, "add_eos_token": False, "added_tokens_decoder": decoder,
                "bos_token": "<|begin_of_text|>", "chat_template": LLAMA3_CHAT_TEMPLATE,
                "clean_up_tokenization_spaces": True, "eos_token": "<|eot_id|>",
                "model_input_names": ["input_ids", "attention_mask"],
                "model_max_length": 1000000000000000019884624838656,
                "tokenizer_class": "PreTrainedTokenizerFast"}
    return {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": decoder,
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"], "bos_token": None,
            "chat_template": QWEN2_CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 32768,
            "pad_token": "<|endoftext|>", "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}

# ---- The SentencePiece-style kinds and the other byte-level ones ----

META = "\u2581"  # SentencePiece's "▁"
SPM_KINDS = ["llama2", "mistral", "gemma"]
BYTE_LEVEL_KINDS = ["smollm", "gpt2"]
MORE_TRAINED_VOCAB = {"llama2": 1100, "mistral": 1100, "gemma": 1150, "smollm": 1100, "gpt2": 1000}
TRAINED_ALPHABET = 160  # the most frequent characters; the others take byte fallback

LLAMA2_SPECIALS = ["<unk>", "<s>", "</s>"]
MISTRAL_SPECIALS = LLAMA2_SPECIALS + ["[INST]", "[/INST]", "[TOOL_CALLS]"]
GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"]
SMOLLM_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>", "<file_sep>",
                   "<filename>", "<gh_stars>", "<issue_start>", "<issue_comment>", "<issue_closed>",
                   "<jupyter_start>", "<jupyter_text>", "<jupyter_code>", "<jupyter_output>", "<jupyter_script>",
                   "<empty_output>"]
GPT2_EOT = "<|endoftext|>"
# What each kind's added tokens are; the tests and the golden corpus use them.
MORE_SPECIALS = {"llama2": LLAMA2_SPECIALS, "mistral": MISTRAL_SPECIALS, "gemma": GEMMA_SPECIALS,
                 "smollm": SMOLLM_SPECIALS, "gpt2": [GPT2_EOT]}

# Chat templates in the style of the releases (Llama-2-chat, Mistral-Instruct, Gemma-it, SmolLM2-Instruct).
LLAMA2_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = "
    "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
    "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}")
MISTRAL_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] "
    "+ '[/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}")
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] == 'assistant' else "
    "message['role'] %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}")
SMOLLM_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def _added(content, id_, special=True, normalized=False):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": normalized, "special": special}


def _template(bos, bos_id):
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}


def _replace(pattern, content):
    return {"type": "Replace", "pattern": {"String": pattern}, "content": content}


SPM_DECODER = {"type": "Sequence", "decoders": [_replace(META, " "), {"type": "ByteFallback"}, {"type": "Fuse"}]}
LLAMA_DECODER = {"type": "Sequence", "decoders": SPM_DECODER["decoders"] + [
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def _train(pre_tokenizer, normalizer, vocab_size, special_tokens, alphabet):
    """A trained BPE model's vocab (id order) and merges (pairs). SentencePiece kinds train on words
    that start with their run of "▁" (the space rewrite in front), so pieces never span words, and
    on the `alphabet` most frequent characters only (ties by code point: the trainer's own
    limit_alphabet breaks ties differently from run to run); the others are left out of the
    training text, so that they take byte fallback."""
    lines = corpus()
    if alphabet:
        counts = collections.Counter(c for line in lines for c in line.replace(" ", META))
        keep = set(c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:alphabet]) | {" "}
        lines = ["".join(c for c in line if c in keep) for line in lines]
    model = models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True) if alphabet else models.BPE()
    tok = Tokenizer(model)
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    kwargs = {} if alphabet else {"initial_alphabet": pre_tokenizers.ByteLevel.alphabet()}
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, show_progress=False,
                                  special_tokens=special_tokens, **kwargs)
    tok.train_from_iterator(lines, trainer=trainer)
    trained = json.loads(tok.to_str())["model"]
    vocab = dict(sorted(trained["vocab"].items(), key=lambda kv: kv[1]))
    assert list(vocab.values()) == list(range(len(vocab))), "trained ids are not dense"
    merges = [m if isinstance(m, list) else m.split(" ") for m in trained["merges"]]
    return vocab, merges


def _build_more(kind):
    """(tokenizer.json dict, tokenizer_config.json dict, added-token count) of a SPM_KINDS or
    BYTE_LEVEL_KINDS kind."""
    n_trained = MORE_TRAINED_VOCAB[kind]
    specials = MORE_SPECIALS[kind]
    if kind in SPM_KINDS:
        byte_tokens = ["<0x%02X>" % b for b in range(256)]
        if kind == "gemma":
            byte_tokens[9] = "\t"  # GemmaConverter: "\t" replaces "<0x09>"
        word_split = pre_tokenizers.Split(Regex(META + "*[^" + META + "]+|" + META + "+"), behavior="isolated")
        train_norm = normalizers.Sequence([normalizers.Prepend(META), normalizers.Replace(" ", META)])
        if kind == "gemma":
            train_norm = normalizers.Replace(" ", META)
        vocab, merges = _train(word_split, train_norm, n_trained + len(specials) + 256, specials + byte_tokens,
                               TRAINED_ALPHABET)
        bos = "<bos>" if kind == "gemma" else "<s>"
        bpe = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
               "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
               "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges] if kind == "llama2" else merges}
        data = {"version": "1.0", "truncation": None, "padding": None,
                "added_tokens": [_added(t, vocab[t]) for t in specials]}
        if kind == "llama2":
            data.update(normalizer={"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": META}, _replace(" ", META)]}, pre_tokenizer=None)
        elif kind == "mistral":
            data.update(normalizer=None, pre_tokenizer={"type": "Metaspace", "replacement": META,
                                                        "prepend_scheme": "first", "split": False})
        else:
            data.update(normalizer=_replace(" ", META), pre_tokenizer={
                "type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False})
        data.update(post_processor=_template(bos, vocab[bos]),
                    decoder=SPM_DECODER if kind == "gemma" else LLAMA_DECODER, model=bpe)
        config = _spm_config(kind)
    else:
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        if kind == "smollm":
            pre = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, byte_level]}
            vocab, merges = _train(pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                            pre_tokenizers.ByteLevel(add_prefix_space=False)]),
                                   None, n_trained + len(specials), specials, 0)
            added = [_added(t, vocab[t]) for t in specials]
            prefixes = {"continuing_subword_prefix": None, "end_of_word_suffix": None}
        else:
            pre = byte_level
            vocab, merges = _train(pre_tokenizers.ByteLevel(add_prefix_space=False), None, n_trained, [], 0)
            vocab[GPT2_EOT] = len(vocab)
            added = [_added(GPT2_EOT, vocab[GPT2_EOT], normalized=True)]
            prefixes = {"continuing_subword_prefix": "", "end_of_word_suffix": ""}
        data = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
                "pre_tokenizer": pre, "post_processor": _byte_level(True, False, True),
                "decoder": _byte_level(True, True, True),
                "model": {"type": "BPE", "dropout": None, "unk_token": None, **prefixes, "fuse_unk": False,
                          "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                          "merges": [f"{a} {b}" for a, b in merges] if kind == "gpt2" else merges}}
        config = _byte_level_config(kind)
    return data, config, len(specials)


def _token_config(content):
    return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False}


def _decoder_entries(data):
    return {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for a in data["added_tokens"]}


def _spm_config(kind):
    if kind == "gemma":
        return {"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "chat_template": GEMMA_CHAT_TEMPLATE,
                "clean_up_tokenization_spaces": False, "eos_token": "<eos>", "legacy": None,
                "model_max_length": 1000000000000000019884624838656, "pad_token": "<pad>", "sp_model_kwargs": {},
                "spaces_between_special_tokens": False, "tokenizer_class": "GemmaTokenizer", "unk_token": "<unk>",
                "use_default_system_prompt": False}
    return {"add_bos_token": True, "add_eos_token": False, "bos_token": _token_config("<s>"),
            "chat_template": LLAMA2_CHAT_TEMPLATE if kind == "llama2" else MISTRAL_CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False, "eos_token": _token_config("</s>"), "legacy": kind == "llama2",
            "model_max_length": 1000000000000000019884624838656, "pad_token": None, "padding_side": "right",
            "sp_model_kwargs": {}, "tokenizer_class": "LlamaTokenizer", "unk_token": _token_config("<unk>")}


def _byte_level_config(kind):
    if kind == "gpt2":
        return {"add_prefix_space": False, "bos_token": GPT2_EOT, "eos_token": GPT2_EOT, "model_max_length": 1024,
                "tokenizer_class": "GPT2Tokenizer", "unk_token": GPT2_EOT}
    return {"add_prefix_space": False, "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "bos_token": "<|im_start|>", "chat_template": SMOLLM_CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>", "model_max_length": 8192, "pad_token": "<|im_end|>",
            "tokenizer_class": "GPT2Tokenizer", "unk_token": "<|endoftext|>", "vocab_size": 49152}


def _write_json(out_dir, data, config, n_added):
    """Writes the two files (checking that HF loads tokenizer.json as written); returns the id count."""
    config = dict(config, added_tokens_decoder=_decoder_entries(data))
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    check = Tokenizer.from_str(text)
    vocab_size = check.get_vocab_size(with_added_tokens=True)
    assert vocab_size == len(data["model"]["vocab"]) + sum(a["id"] >= len(data["model"]["vocab"])
                                                           for a in data["added_tokens"]), vocab_size
    assert len(data["added_tokens"]) == n_added
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(dict(sorted(config.items())), indent=2, ensure_ascii=False) + "\n")
    return vocab_size


def write_tokenizer(kind, out_dir):
    """Trains the `kind` (one of KINDS) tokenizer, writes tokenizer.json and tokenizer_config.json
    into out_dir (created if needed) and returns the vocabulary size: the number of ids, special
    tokens included (max id + 1)."""
    if kind in SPM_KINDS or kind in BYTE_LEVEL_KINDS:
        return _write_json(out_dir, *_build_more(kind))
    tok, pattern, specials = _build(kind)
    data = _tokenizer_json(kind, tok, pattern, specials)
    n_model = len(data["model"]["vocab"])
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    # The file must load in HF tokenizers exactly as written.
    check = Tokenizer.from_str(text)
    vocab_size = check.get_vocab_size(with_added_tokens=True)
    assert vocab_size == n_model + len(specials), (vocab_size, n_model, len(specials))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    config = _tokenizer_config(kind, specials, n_model)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return vocab_size


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=KINDS + ["all"], default="all")
    parser.add_argument("--out", required=True,
                        help="output folder (with --kind all: one subfolder per kind)")
    args = parser.parse_args(argv)
    kinds = KINDS if args.kind == "all" else [args.kind]
    for kind in kinds:
        out = os.path.join(args.out, kind) if args.kind == "all" else args.out
        n = write_tokenizer(kind, out)
        print(f"{kind}: {n} ids -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
