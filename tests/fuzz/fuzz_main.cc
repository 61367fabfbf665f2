// libFuzzer target: ember_fuzz_load CORPUS_DIR -max_len=262144 (seed corpus: tests/fuzz/corpus in
// the build tree, written by ember_fuzz_replay_test). See fuzz_load.h for the input format.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_load.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return ember::fuzz::load_one(data, size); }
