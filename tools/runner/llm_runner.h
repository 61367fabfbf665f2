// runner's LLM modes (docs/DESIGN.md §6): generation from a program's `step` method with its embedded
// tokenizer (--prompt, --chat, --prompts-file) or from token ids (--prompt-ids, no tokenizer
// needed), the logits of each generated token (--dump-logits), tokenizer checks (--encode,
// --decode), and the LLM part of --info.
#pragma once

#include "tools/runner/runner_common.h"

namespace ember::runner {

// True when `o` asks for an LLM mode (any of --prompt, --prompt-ids, --prompts-file, --encode,
// --decode).
bool wants_llm(const Options& o);
// Runs it; throws Failure with a one-line message on any error.
int run_llm(const Options& o);
// runner --info on a program with an LlmInfo table: what the table and the KV cache's state
// declarations say (sizes, KV bytes, the num_blocks range, EOS / BOS, chat template, tokenizer,
// generation defaults), "unknown" for what the program does not store. Prints nothing for other
// programs; throws Failure when the table cannot be read.
void print_llm_info(const Program& program);

}  // namespace ember::runner
