#!/usr/bin/env python3
"""Does transformers apply `sliding_window` to a checkpoint loaded as Llama? (issue 17)

The exporter refuses a llama config that sets sliding_window: a silent choice either way could
generate tokens other than the class the user runs in transformers. This probe records what
transformers does, on the mistral_f32 checkpoint of make_checkpoints.py (window 8):

    python3 tests/llm/hf_sliding_window_probe.py --checkpoint tests/data/llm/checkpoints/mistral_f32

It loads the checkpoint as MistralForCausalLM and, from a copy whose config.json says llama /
LlamaForCausalLM (same weights, sliding_window kept), as LlamaForCausalLM; runs one 33-token prompt
(eager attention, CPU, float32) and prints, per class, the relative L2 distance of the logits from
the numpy forward with and without the window (tests/llm/reference_forward.py). Needs torch and
transformers (the GPU machine's image).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference_forward as rf  # noqa: E402


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    args = parser.parse_args()
    import torch
    import transformers
    torch.manual_seed(0)
    ids = [int(i) for i in np.random.default_rng(17).integers(300, 1100, 33)]
    numpy_model = rf.load(args.checkpoint)
    windowed = numpy_model.logits(ids)
    numpy_model.config["sliding_window"] = None
    full = numpy_model.logits(ids)
    results = {"transformers": transformers.__version__, "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        llama_dir = os.path.join(tmp, "as_llama")
        shutil.copytree(args.checkpoint, llama_dir)
        with open(os.path.join(llama_dir, "config.json")) as f:
            config = json.load(f)
        config.update(model_type="llama", architectures=["LlamaForCausalLM"])
        with open(os.path.join(llama_dir, "config.json"), "w") as f:
            json.dump(config, f)
        for name, path in (("MistralForCausalLM", args.checkpoint), ("LlamaForCausalLM", llama_dir)):
            model = transformers.AutoModelForCausalLM.from_pretrained(
                path, dtype=torch.float32, attn_implementation="eager").eval()
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0].double().numpy()
            results[name] = {"class": type(model).__name__,
                             "rel_l2_vs_windowed": rel_l2(logits, windowed),
                             "rel_l2_vs_full_causal": rel_l2(logits, full)}
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
