// The `exporter` command line, as a function so tests can drive it without a process:
//   exporter MODEL.onnx -o out.pte [--input-shape NAME=DIMS ...] [--backends LIST] [--manifest PATH]
//            [--strip-debug] [--no-fold]
//   exporter --example mlp|cnn -o out.pte [--backends LIST] [--manifest PATH] [--seed N] [--strip-debug]
//   [--compile-spec BACKEND:KEY=VALUE ...] (any form)
//   [--allow-non-finite-weights] and, for checkpoint folders, --max-seqs/--max-tokens/... (README)
// Prints the summary to `out`; every error is one line "exporter: error: ..." on `err` and exit
// code 1 (out of memory: "exporter: out of memory while <stage>: ..."). Numeric flags parse
// strictly (whole text, range) and name the flag and text when they do not. Warnings are
// "exporter: warning: ..." lines on `err`. Returns the process exit code.
#pragma once

#include <ostream>

namespace ember::exporter {

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace ember::exporter
