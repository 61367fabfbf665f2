// libFuzzer targets for the exporter's parsers: one binary per entry point of fuzz_exporter.h,
// chosen at build time (EMBER_FUZZ_ENTRY names the function). Usage and seeds: tests/fuzz/README.md.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_exporter.h"

#ifndef EMBER_FUZZ_ENTRY
#error "EMBER_FUZZ_ENTRY must name an entry point of fuzz_exporter.h"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return ember::fuzz::EMBER_FUZZ_ENTRY(data, size); }

#ifdef EMBER_FUZZ_ONNX_MUTATOR
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return ember::fuzz::onnx_mutate(data, size, max_size, seed, LLVMFuzzerMutate);
}
#endif
