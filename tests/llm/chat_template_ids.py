#!/usr/bin/env python3
"""transformers' apply_chat_template ids for the chat cases of tests/exporter/llm_info_test.cc.

Needs transformers (the GPU machine's image: transformers 5.17; CPU only, a few seconds). Run from the
repository root:

    python3 tests/llm/chat_template_ids.py [--out FILE]

For each tokenizer of tests/data/llm (llama3, qwen2) and each case (one user message, optionally
after a system message) it prints the text of apply_chat_template(add_generation_prompt=True), its
ids with tokenize=True, and whether they equal tokenizer(text, add_special_tokens=False) (they do:
the Llama-3 template writes <|begin_of_text|> itself). The C++ test holds these ids as constants
(kLlama3ChatIds, kQwen2ChatIds); keep CASES in step with its kChatCases.
"""
import argparse
import json

from transformers import AutoTokenizer, __version__ as transformers_version

CASES = [  # (system or None, user)
    (None, "Hello, world!"),
    (" Be terse.\n", "  Two\nlines \n"),
    ("", "hi"),
    (None, "  Hello, world!\n"),
    ("\tYou are a pirate. ", "Where is the treasure?\r\n"),
    (None, "caf\u00e9 \u00bfqu\u00e9 tal? 12345 \U0001F600 <|im_end|> <|eot_id|>"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the results as JSON here")
    args = parser.parse_args()
    out = {"transformers": transformers_version}
    for family in ("llama3", "qwen2"):
        tok = AutoTokenizer.from_pretrained(f"tests/data/llm/{family}")
        results = []
        for system, user in CASES:
            messages = ([] if system is None else [{"role": "system", "content": system}]) + [
                {"role": "user", "content": user}]
            text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if not isinstance(ids, list):  # transformers 5 may return a BatchEncoding
                ids = ids["input_ids"]
            plain = tok(text, add_special_tokens=False)["input_ids"]
            results.append({"text": text, "ids": list(ids), "equal_without_special_tokens": list(plain) == list(ids)})
            print(family, json.dumps(text), list(ids))
        out[family] = results
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
