// runner's LLM modes (docs/DESIGN.md §6): generation from a program's `step` method with its embedded
// tokenizer (--prompt, --chat, --prompts-file), and tokenizer checks (--encode, --decode).
#pragma once

#include "tools/runner/runner_common.h"

namespace ember::runner {

// True when `o` asks for an LLM mode (any of --prompt, --prompts-file, --encode, --decode).
bool wants_llm(const Options& o);
// Runs it; throws Failure with a one-line message on any error.
int run_llm(const Options& o);

}  // namespace ember::runner
